"""The LangGraph adapter (``hitl_client.langgraph``) with the real langchain agent, a scripted model, an
in-memory checkpointer and a live uvicorn: a ``HumanInTheLoopMiddleware`` pause is decided by the
service's reviewers; the gated tool (a POST to a loopback recorder) runs once when approved (by a
reviewer or an ``AUTO_APPROVE`` timeout), with the reviewer's edit, never when rejected, answered with
guidance, timed out or aborted, never twice when the same interrupt is resumed again or the tools node
runs again from its checkpoint, and never without an approval of exactly the call that runs. A process
killed in the middle and a run resumed by another process: tests/e2e/test_live_adapter_processes.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hitl_client import AlreadyClaimed, AsyncHitlClient, HitlClient, OutcomeUnknown
from hitl_client.langgraph import ClaimApprovedCalls, NotGranted, adecisions_for, decisions_for
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from harnesses.echo_target import EchoTarget, running_echo_target
from harnesses.live_stack import LiveStack, api_user, eventually, running_stack

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]
EXAMPLE = Path(__file__).resolve().parents[2] / "clients" / "python" / "examples" / "langgraph_refund.py"


@pytest.fixture(scope="module")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveStack]:
    # the q-clusters run the AUTO_REJECT timer
    yield from running_stack(django_db_blocker, tmp_path_factory.mktemp("langgraph"), qclusters=True)


@pytest.fixture(scope="module")
def target() -> Iterator[EchoTarget]:
    with running_echo_target() as running:
        yield running


@pytest.fixture
def hitl(live_stack: LiveStack, request: pytest.FixtureRequest) -> Iterator[HitlClient]:
    token = api_user(f"lg-{request.node.name[:40]}", "agent")
    with HitlClient(live_stack.base_url, token, agent="refund-bot") as client:
        yield client


@pytest.fixture
def approver(live_stack: LiveStack) -> Iterator[httpx.Client]:
    client = live_stack.client(api_user("approver", "approver"))
    yield client
    client.close()


class ScriptedModel(GenericFakeChatModel):
    """A chat model that answers from its script and takes any tools."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def refund_agent(
    target: EchoTarget,
    client: HitlClient | AsyncHitlClient,
    amount: int = 250,
    *,
    amounts: tuple[int, ...] | None = None,
    mode: str = "batched",
) -> Any:
    """The agent: its model asks for one refund (``amounts``: one per amount, in one turn), each gated."""

    @tool
    def refund(order_id: str, amount: int) -> str:
        """Refund an order."""
        if amount == 13:
            raise ValueError("the payment provider refused")
        response = httpx.post(f"{target.url}/refunds", json={"orderId": order_id, "amount": amount})
        response.raise_for_status()
        return f"refunded {amount}"

    calls = [
        {"name": "refund", "args": {"order_id": "A-1", "amount": each}, "id": f"call-{index}"}
        for index, each in enumerate(amounts or (amount,))
    ]
    script = iter([AIMessage("", tool_calls=calls), AIMessage("Done.")])
    gate = HumanInTheLoopMiddleware(
        {"refund": True}, description_prefix="Refund over 100 EUR", interrupt_mode=mode
    )
    return create_agent(
        ScriptedModel(messages=script),
        [refund],
        middleware=[gate, ClaimApprovedCalls(client, gate)],
        checkpointer=InMemorySaver(),
    )


def start(agent: Any, thread: str) -> tuple[Any, dict[str, Any]]:
    config = {"configurable": {"thread_id": thread}}
    result = agent.invoke({"messages": [{"role": "user", "content": "Refund A-1"}]}, config, version="v2")
    assert result.interrupts
    return result, config


def resume_value(client: HitlClient, paused: Any, run: str, **keywords: Any) -> Any:
    """``decisions_for`` of the paused result's interrupt, with its messages (the tool call ids)."""
    keywords.setdefault("timeout", 30)
    return decisions_for(
        client, paused.interrupts[0], run_id=run, messages=paused.value["messages"], **keywords
    )


def reviewer(
    approver: httpx.Client, decision: dict[str, Any], run: str, amount: int | None = None
) -> threading.Thread:
    """A reviewer who decides the pending request of run ``run`` (of that ``amount``) as soon as it
    appears."""

    def decide() -> None:
        def pending() -> list[dict[str, Any]]:
            found = approver.get("/approval-requests", params={"status": "PENDING"}).json()
            return [
                item
                for item in found["approvalRequests"]
                if item["idempotencyKey"].startswith(f"{run}/")
                and amount in (None, item["action"]["arguments"]["amount"])
            ]

        found = eventually(pending, timeout=20, what=f"the request of {run}")
        approver.post(f"/approval-requests/{found[0]['id']}/decision", json=decision).raise_for_status()

    thread = threading.Thread(target=decide, daemon=True)
    thread.start()
    return thread


def sent(target: EchoTarget, before: int) -> list[str]:
    return [received.body.decode() for received in target.requests_to("/refunds")[before:]]


def tool_messages(result: Any) -> list[ToolMessage]:
    return [message for message in result.value["messages"] if isinstance(message, ToolMessage)]


def the_request(approver: httpx.Client, run: str) -> dict[str, Any]:
    found = approver.get("/approval-requests").json()["approvalRequests"]
    return next(item for item in found if item["idempotencyKey"].startswith(f"{run}/"))


def test_approved_runs_the_tool_once_and_reports_it(hitl, approver, target):
    before = len(target.requests_to("/refunds"))
    agent = refund_agent(target, hitl)
    paused, config = start(agent, "lg-approve")
    reviewer(approver, {"verdict": "APPROVED"}, "lg-approve")
    resume = resume_value(hitl, paused, "lg-approve")
    assert resume == {"decisions": [{"type": "approve"}]}
    result = agent.invoke(Command(resume=resume), config, version="v2")
    assert sent(target, before) == ['{"orderId":"A-1","amount":250}']
    assert [message.content for message in tool_messages(result)] == ["refunded 250"]
    filed = the_request(approver, "lg-approve")
    assert filed["action"] == {"name": "refund", "arguments": {"order_id": "A-1", "amount": 250}}
    assert filed["reason"].startswith("Refund over 100 EUR")
    assert filed["claim"]["outcome"]["status"] == "succeeded"


def test_a_tool_that_fails_is_reported_failed(hitl, approver, target):
    agent = refund_agent(target, hitl, amount=13)
    paused, config = start(agent, "lg-fails")
    reviewer(approver, {"verdict": "APPROVED"}, "lg-fails")
    resume = resume_value(hitl, paused, "lg-fails")
    with pytest.raises(ValueError, match="refused"):
        agent.invoke(Command(resume=resume), config, version="v2")
    outcome = the_request(approver, "lg-fails")["claim"]["outcome"]
    assert outcome["status"] == "failed" and "refused" in outcome["summary"]


def test_a_second_resume_of_the_same_interrupt_files_nothing_and_runs_nothing(hitl, approver, target):
    before = len(target.requests_to("/refunds"))
    agent = refund_agent(target, hitl)
    paused, config = start(agent, "lg-twice")
    reviewer(approver, {"verdict": "APPROVED"}, "lg-twice")
    resume = resume_value(hitl, paused, "lg-twice")
    agent.invoke(Command(resume=resume), config, version="v2")
    # a retried worker: the same run paused again on another graph, answered and resumed again
    again_agent = refund_agent(target, hitl)
    again_paused, again_config = start(again_agent, "lg-twice")
    again = resume_value(hitl, again_paused, "lg-twice")
    assert again == resume  # the same request, found decided: nothing filed
    with pytest.raises(AlreadyClaimed) as refused:
        again_agent.invoke(Command(resume=again), again_config, version="v2")
    assert refused.value.outcome["status"] == "succeeded"
    assert len(sent(target, before)) == 1
    found = approver.get("/approval-requests").json()["approvalRequests"]
    assert len([item for item in found if item["idempotencyKey"].startswith("lg-twice/")]) == 1


def test_the_tools_node_run_again_from_its_checkpoint_runs_nothing(hitl, approver, target):
    """What LangGraph does when the process died in the tools node: it runs the node again from the
    checkpoint saved before it."""
    before = len(target.requests_to("/refunds"))
    agent = refund_agent(target, hitl)
    paused, config = start(agent, "lg-replay")
    reviewer(approver, {"verdict": "APPROVED"}, "lg-replay")
    agent.invoke(Command(resume=resume_value(hitl, paused, "lg-replay")), config, version="v2")
    assert len(sent(target, before)) == 1
    [before_tools] = [state for state in agent.get_state_history(config) if state.next == ("tools",)]
    with pytest.raises(AlreadyClaimed):
        agent.invoke(None, before_tools.config, version="v2")
    assert len(sent(target, before)) == 1


def test_a_resume_after_a_claim_with_no_outcome_raises_and_the_tool_does_not_run(hitl, approver, target):
    before = len(target.requests_to("/refunds"))
    agent = refund_agent(target, hitl)
    paused, config = start(agent, "lg-died")
    reviewer(approver, {"verdict": "APPROVED"}, "lg-died")
    resume = resume_value(hitl, paused, "lg-died")
    hitl.claim(the_request(approver, "lg-died")["id"])  # as the tool's gate did before the process died
    with pytest.raises(OutcomeUnknown):
        agent.invoke(Command(resume=resume), config, version="v2")
    assert sent(target, before) == []


def test_a_gated_call_with_no_approval_request_never_runs(hitl, target):
    before = len(target.requests_to("/refunds"))
    agent = refund_agent(target, hitl)
    paused, config = start(agent, "lg-forged")
    with pytest.raises(NotGranted, match="no approval request"):
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config, version="v2")
    assert sent(target, before) == []


def test_a_call_edited_past_the_approval_never_runs(hitl, approver, target):
    before = len(target.requests_to("/refunds"))
    agent = refund_agent(target, hitl)
    paused, config = start(agent, "lg-widened")
    reviewer(approver, {"verdict": "APPROVED"}, "lg-widened")
    assert resume_value(hitl, paused, "lg-widened") == {"decisions": [{"type": "approve"}]}
    widened = {
        "type": "edit",
        "edited_action": {"name": "refund", "args": {"order_id": "A-1", "amount": 9999}},
    }
    with pytest.raises(NotGranted, match="arguments"):
        agent.invoke(Command(resume={"decisions": [widened]}), config, version="v2")
    assert sent(target, before) == []
    outcome = the_request(approver, "lg-widened")["claim"]["outcome"]
    assert outcome["status"] == "failed" and "not the ones approved" in outcome["summary"]


def test_the_reviewers_edit_runs_with_the_edited_arguments(hitl, approver, target):
    before = len(target.requests_to("/refunds"))
    agent = refund_agent(target, hitl)
    paused, config = start(agent, "lg-edit")
    edited = {"order_id": "A-1", "amount": 100}
    reviewer(approver, {"verdict": "APPROVED", "amendedArguments": edited}, "lg-edit")
    resume = resume_value(hitl, paused, "lg-edit")
    assert resume == {"decisions": [{"type": "edit", "edited_action": {"name": "refund", "args": edited}}]}
    agent.invoke(Command(resume=resume), config, version="v2")
    assert sent(target, before) == ['{"orderId":"A-1","amount":100}']
    assert the_request(approver, "lg-edit")["claim"]["outcome"]["status"] == "succeeded"


def test_a_rejection_tells_the_model_and_runs_nothing(hitl, approver, target):
    before = len(target.requests_to("/refunds"))
    agent = refund_agent(target, hitl)
    paused, config = start(agent, "lg-reject")
    reviewer(approver, {"verdict": "REJECTED", "note": "Not this customer"}, "lg-reject")
    resume = resume_value(hitl, paused, "lg-reject")
    assert resume == {"decisions": [{"type": "reject", "message": "Not this customer"}]}
    result = agent.invoke(Command(resume=resume), config, version="v2")
    assert sent(target, before) == []
    [message] = tool_messages(result)
    assert message.status == "error" and "Not this customer" in message.content


def test_guidance_is_the_tools_answer_and_nothing_runs(hitl, approver, target):
    before = len(target.requests_to("/refunds"))
    agent = refund_agent(target, hitl)
    paused, config = start(agent, "lg-respond")
    guidance = "Refund 100 and open a ticket"
    reviewer(approver, {"verdict": "REJECTED", "note": guidance, "guidance": True}, "lg-respond")
    resume = resume_value(hitl, paused, "lg-respond")
    assert resume == {"decisions": [{"type": "respond", "message": guidance}]}
    result = agent.invoke(Command(resume=resume), config, version="v2")
    assert sent(target, before) == []
    assert [message.content for message in tool_messages(result)] == [guidance]


@pytest.mark.parametrize(
    ("policy", "decision", "refunds"),
    [("AUTO_REJECT", "reject", 0), ("AUTO_APPROVE", "approve", 1), ("ABORT", "reject", 0)],
)
def test_a_timeout_decides_by_its_policy(hitl, target, policy, decision, refunds):
    before = len(target.requests_to("/refunds"))
    agent = refund_agent(target, hitl)
    run = f"lg-timeout-{policy.lower()}"
    paused, config = start(agent, run)
    resume = resume_value(hitl, paused, run, hitl_config={"approvalTimeout": "PT1S", "timeoutPolicy": policy})
    assert [each["type"] for each in resume["decisions"]] == [decision]
    agent.invoke(Command(resume=resume), config, version="v2")
    assert len(sent(target, before)) == refunds


def test_without_waiting_the_graph_stays_paused_until_decided(hitl, approver, target):
    before = len(target.requests_to("/refunds"))
    agent = refund_agent(target, hitl)
    paused, config = start(agent, "lg-later")
    assert resume_value(hitl, paused, "lg-later", wait=False) is None
    filed = the_request(approver, "lg-later")
    approver.post(
        f"/approval-requests/{filed['id']}/decision", json={"verdict": "APPROVED"}
    ).raise_for_status()
    state = agent.get_state(config)  # later, from the checkpointer
    resume = decisions_for(
        hitl, state.interrupts[0], run_id="lg-later", messages=state.values["messages"], wait=False
    )
    agent.invoke(Command(resume=resume), config, version="v2")
    assert len(sent(target, before)) == 1
    assert the_request(approver, "lg-later")["status"] == "APPROVED"


def test_two_calls_in_one_turn_each_get_their_own_request_and_decision(hitl, approver, target):
    before = len(target.requests_to("/refunds"))
    agent = refund_agent(target, hitl, amounts=(250, 900))
    paused, config = start(agent, "lg-two")
    reviewer(approver, {"verdict": "APPROVED"}, "lg-two", amount=250)
    reviewer(approver, {"verdict": "REJECTED", "note": "Too much"}, "lg-two", amount=900)
    resume = resume_value(hitl, paused, "lg-two")
    assert resume == {"decisions": [{"type": "approve"}, {"type": "reject", "message": "Too much"}]}
    result = agent.invoke(Command(resume=resume), config, version="v2")
    assert sent(target, before) == ['{"orderId":"A-1","amount":250}']
    assert sorted(message.status for message in tool_messages(result)) == ["error", "success"]


def test_a_per_call_interrupt_is_answered_by_its_id(hitl, approver, target):
    before = len(target.requests_to("/refunds"))
    agent = refund_agent(target, hitl, mode="per_call")
    paused, config = start(agent, "lg-per-call")
    [interrupt] = paused.interrupts
    assert interrupt.value["type"] == "tool_approval"
    reviewer(
        approver,
        {"verdict": "APPROVED", "amendedArguments": {"order_id": "A-1", "amount": 99}},
        "lg-per-call",
    )
    decision = decisions_for(hitl, interrupt, run_id="lg-per-call", timeout=30)
    assert decision == {
        "type": "edit",
        "edited_action": {"name": "refund", "args": {"order_id": "A-1", "amount": 99}},
    }
    agent.invoke(Command(resume={interrupt.id: decision}), config, version="v2")
    assert sent(target, before) == ['{"orderId":"A-1","amount":99}']
    filed = the_request(approver, "lg-per-call")
    assert filed["idempotencyKey"] == "lg-per-call/tool-call:call-0"
    assert filed["claim"]["outcome"]["status"] == "succeeded"


def test_the_async_twin_with_ainvoke(live_stack, approver, target):
    before = len(target.requests_to("/refunds"))
    token = api_user("lg-async-bot", "agent")
    reviewer(approver, {"verdict": "APPROVED"}, "lg-async")

    async def run() -> None:
        async with AsyncHitlClient(live_stack.base_url, token, agent="refund-bot") as client:
            agent = refund_agent(target, client, amount=42)
            config = {"configurable": {"thread_id": "lg-async"}}
            paused = await agent.ainvoke(
                {"messages": [{"role": "user", "content": "Refund"}]}, config, version="v2"
            )
            resume = await adecisions_for(
                client, paused.interrupts[0], run_id="lg-async", messages=paused.value["messages"], timeout=30
            )
            await agent.ainvoke(Command(resume=resume), config, version="v2")

    asyncio.run(run())
    assert sent(target, before) == ['{"orderId":"A-1","amount":42}']
    assert the_request(approver, "lg-async")["claim"]["outcome"]["status"] == "succeeded"


@pytest.mark.parametrize(
    ("verdict", "code", "refunds"), [("APPROVED", 0, 1), ("REJECTED", 1, 0)], ids=["approved", "rejected"]
)
def test_the_example_exits_by_the_decision(live_stack, approver, target, verdict, code, refunds):
    before = len(target.requests_to("/refunds"))
    run = f"lg-example-{verdict.lower()}"
    env = {
        **os.environ,
        "HITL_URL": live_stack.base_url,
        "HITL_TOKEN": api_user(f"{run}-bot", "agent"),
        "REFUND_URL": f"{target.url}/refunds",
        "RUN_ID": run,
    }
    env.pop("OPENAI_API_KEY", None)
    reviewer(
        approver, {"verdict": verdict, "note": "No"} if verdict == "REJECTED" else {"verdict": verdict}, run
    )
    done = subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stdout + done.stderr
    assert len(sent(target, before)) == refunds


def test_a_batched_interrupt_without_its_messages_files_nothing(hitl, approver, target):
    agent = refund_agent(target, hitl)
    paused, _ = start(agent, "lg-no-messages")
    with pytest.raises(ValueError, match="messages="):
        decisions_for(hitl, paused.interrupts[0], run_id="lg-no-messages")
    found = approver.get("/approval-requests").json()["approvalRequests"]
    assert not [item for item in found if item["idempotencyKey"].startswith("lg-no-messages/")]


def test_two_calls_sharing_one_id_file_nothing(hitl, approver, target):
    agent = refund_agent(target, hitl, amounts=(250, 900))
    paused, _ = start(agent, "lg-same-id")
    messages = paused.value["messages"]
    for call in messages[-1].tool_calls:
        call["id"] = "call-same"  # what a model may write
    with pytest.raises(ValueError, match="share an id"):
        decisions_for(hitl, paused.interrupts[0], run_id="lg-same-id", messages=messages)
    found = approver.get("/approval-requests").json()["approvalRequests"]
    assert not [item for item in found if item["idempotencyKey"].startswith("lg-same-id/")]
