"""The OpenAI Agents SDK adapter (hitl_client.openai_agents) with the real SDK against a live uvicorn: a
tool declared ``needs_approval=True`` pauses the run, each pause is filed once per run and tool call,
and the tool posts to the loopback recorder only once a reviewer approved it, at most once, even when
the serialized RunState is resumed again in another adapter call. A rejection or a reviewer's guidance
reaches the model as the tool's result. The model is the local Chat Completions stub behind the SDK's
``OpenAIChatCompletionsModel``."""

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
from agents import Agent, OpenAIChatCompletionsModel, Runner, RunState, function_tool, set_tracing_disabled
from hitl_client import AlreadyClaimed, AsyncHitlClient, HitlClient, OutcomeUnknown
from hitl_client.openai_agents import (
    apply_decisions,
    apply_decisions_async,
    report_outcomes,
    report_outcomes_async,
)
from openai import AsyncOpenAI

from harnesses.chat_stub import ChatStub, running_chat_stub
from harnesses.echo_target import EchoTarget, running_echo_target
from harnesses.live_stack import LiveStack, api_user, eventually, running_stack

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]
EXAMPLE = Path(__file__).resolve().parents[2] / "clients/python/examples/openai_agents_refund.py"


@pytest.fixture(scope="module")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveStack]:
    yield from running_stack(django_db_blocker, tmp_path_factory.mktemp("openai-agents"), qclusters=True)


@pytest.fixture(scope="module")
def target() -> Iterator[EchoTarget]:
    with running_echo_target() as running:
        yield running


@pytest.fixture
def stub() -> Iterator[ChatStub]:
    with running_chat_stub() as running:
        yield running


@pytest.fixture
def token(request: pytest.FixtureRequest) -> str:
    return api_user(f"bot-{request.node.name[:40]}", "agent")


@pytest.fixture
def approver(live_stack: LiveStack) -> Iterator[httpx.Client]:
    client = live_stack.client(api_user("approver", "approver"))
    yield client
    client.close()


def refund_agent(stub: ChatStub, target: EchoTarget) -> Agent[Any]:
    @function_tool(needs_approval=True)
    async def refund(order_id: str, amount: int) -> str:
        """Refund ``amount`` euros on the order ``order_id``."""
        async with httpx.AsyncClient() as http:
            await http.post(f"{target.url}/refunds", json={"orderId": order_id, "amount": amount})
        return f"refunded {amount} on {order_id}"

    set_tracing_disabled(True)
    model = OpenAIChatCompletionsModel(
        model="stub", openai_client=AsyncOpenAI(base_url=f"{stub.url}/v1", api_key="sk-none", max_retries=0)
    )
    return Agent(name="refund-bot", instructions="Refund what you are asked to.", tools=[refund], model=model)


def script(stub: ChatStub, call_id: str) -> None:
    stub.call_tools({"id": call_id, "name": "refund", "arguments": {"order_id": "A-1", "amount": 250}})
    stub.reply("done")


def reviewer(approver: httpx.Client, decision: dict[str, Any], *, run_id: str) -> threading.Thread:
    """A reviewer who decides the pending request of ``run_id`` as soon as it appears."""

    def decide() -> None:
        found = eventually(lambda: filed(approver, run_id, status="PENDING"), timeout=20)
        approver.post(f"/approval-requests/{found[0]['id']}/decision", json=decision).raise_for_status()

    thread = threading.Thread(target=decide, daemon=True)
    thread.start()
    return thread


def filed(approver: httpx.Client, run_id: str, *, status: str | None = None) -> list[dict[str, Any]]:
    params = {"status": status} if status else {}
    found = approver.get("/approval-requests", params=params).json()["approvalRequests"]
    return [item for item in found if item["idempotencyKey"].startswith(f"{run_id}/")]


def tool_results(stub: ChatStub) -> list[str]:
    """What the model read as the tool's result, in its last request."""
    return [message["content"] for message in stub.requests[-1]["messages"] if message["role"] == "tool"]


def test_approved_the_tool_runs_once_and_a_second_resume_never_runs_it(
    live_stack, stub, target, token, approver
):
    agent, before = refund_agent(stub, target), len(target.requests_to("/refunds"))
    script(stub, "call_a")
    hitl = HitlClient(live_stack.base_url, token, agent="refund-bot")

    async def run() -> str:
        paused = await Runner.run(agent, "Refund order A-1")
        assert [(item.name, item.call_id) for item in paused.interruptions] == [("refund", "call_a")]
        state = paused.to_state()
        saved = state.to_string()
        thread = reviewer(approver, {"verdict": "APPROVED"}, run_id="oa-1")
        decisions = apply_decisions(hitl, state, paused.interruptions, run_id="oa-1", timeout=30)
        thread.join(5)
        assert decisions
        done = await Runner.run(agent, state)
        report_outcomes(hitl, done, decisions)
        again = await RunState.from_string(agent, saved)
        with pytest.raises(AlreadyClaimed) as claimed:
            apply_decisions(hitl, again, again.get_interruptions(), run_id="oa-1", timeout=5)
        assert claimed.value.outcome["status"] == "succeeded"
        return str(done.final_output)

    assert asyncio.run(run()) == "done"
    assert len(target.requests_to("/refunds")) == before + 1
    assert tool_results(stub) == ["refunded 250 on A-1"]
    [request] = filed(approver, "oa-1")
    assert request["claim"]["outcome"]["status"] == "succeeded"
    hitl.close()


@pytest.mark.parametrize(
    ("decision", "read"),
    [
        ({"verdict": "REJECTED", "note": "Not this month"}, "A reviewer rejected this call: Not this month"),
        ({"verdict": "REJECTED", "note": "Refund 100 instead", "guidance": True}, "Refund 100 instead"),
    ],
    ids=["reject", "respond"],
)
def test_not_approved_the_tool_never_runs_and_the_model_reads_why(
    live_stack, stub, target, token, approver, decision, read
):
    agent, before = refund_agent(stub, target), len(target.requests_to("/refunds"))
    script(stub, "call_r")
    run_id = f"oa-{decision.get('guidance', False)}"

    async def run() -> str:
        async with AsyncHitlClient(live_stack.base_url, token, agent="refund-bot") as hitl:
            paused = await Runner.run(agent, "Refund order A-1")
            state = paused.to_state()
            reviewer(approver, decision, run_id=run_id)
            decisions = await apply_decisions_async(
                hitl, state, paused.interruptions, run_id=run_id, timeout=30
            )
            assert decisions and decisions.claimed == {}
            done = await Runner.run(agent, state)
            await report_outcomes_async(hitl, done, decisions)
            return str(done.final_output)

    assert asyncio.run(run()) == "done"
    assert tool_results(stub) == [read]
    assert len(target.requests_to("/refunds")) == before


def test_a_serialized_state_resumed_elsewhere_files_nothing_twice_and_runs_once(
    live_stack, stub, target, token, approver
):
    agent, before = refund_agent(stub, target), len(target.requests_to("/refunds"))
    script(stub, "call_s")

    async def pause() -> str:
        paused = await Runner.run(agent, "Refund order A-1")
        state = paused.to_state()
        with HitlClient(live_stack.base_url, token, agent="refund-bot") as hitl:
            assert not apply_decisions(hitl, state, paused.interruptions, run_id="oa-s", wait=False)
        return state.to_string()

    saved = asyncio.run(pause())  # the process that paused goes away; the text is all that is kept
    [pending] = filed(approver, "oa-s", status="PENDING")
    assert pending["hitlConfig"]["allowEdit"] is False
    edit = {"verdict": "APPROVED", "amendedArguments": {"order_id": "A-1", "amount": 1}}
    assert approver.post(f"/approval-requests/{pending['id']}/decision", json=edit).status_code >= 400
    approver.post(
        f"/approval-requests/{pending['id']}/decision", json={"verdict": "APPROVED"}
    ).raise_for_status()

    async def resume(*, run_the_tool: bool) -> None:
        state = await RunState.from_string(agent, saved)
        async with AsyncHitlClient(live_stack.base_url, token, agent="refund-bot") as hitl:
            decisions = await apply_decisions_async(
                hitl, state, state.get_interruptions(), run_id="oa-s", wait=False
            )
            assert decisions
            if run_the_tool:  # ... and the process dies before it reports the outcome
                await Runner.run(agent, state)

    asyncio.run(resume(run_the_tool=True))
    assert len(target.requests_to("/refunds")) == before + 1
    with pytest.raises(OutcomeUnknown):
        asyncio.run(resume(run_the_tool=False))
    assert len(target.requests_to("/refunds")) == before + 1
    assert [item["id"] for item in filed(approver, "oa-s")] == [pending["id"]]


@pytest.mark.parametrize(
    ("policy", "read", "refunds"),
    [
        ("AUTO_REJECT", "This call was rejected: nobody approved it in time.", 0),
        ("ABORT", "Nobody decided this call in time; it did not run.", 0),
        ("AUTO_APPROVE", "refunded 250 on A-1", 1),
    ],
)
def test_a_timeout_decides_the_call_by_its_policy(live_stack, stub, target, token, policy, read, refunds):
    agent, before = refund_agent(stub, target), len(target.requests_to("/refunds"))
    script(stub, "call_t")
    timer = {"approvalTimeout": "PT1S", "timeoutPolicy": policy}

    async def run() -> None:
        async with AsyncHitlClient(live_stack.base_url, token, agent="refund-bot") as hitl:
            paused = await Runner.run(agent, "Refund order A-1")
            state = paused.to_state()
            decisions = await apply_decisions_async(
                hitl, state, paused.interruptions, run_id=f"oa-t-{policy}", timeout=30, hitl_config=timer
            )
            [found] = decisions.requests.values()
            assert found.decision is None or found.decision.automated
            done = await Runner.run(agent, state)
            await report_outcomes_async(hitl, done, decisions)

    asyncio.run(run())
    assert tool_results(stub) == [read]
    assert len(target.requests_to("/refunds")) == before + refunds


def test_the_example_exits_0_once_a_reviewer_approved(live_stack, target, token, approver):
    before = len(target.requests_to("/refunds"))
    reviewer(approver, {"verdict": "APPROVED"}, run_id="example-1")
    env = {
        **os.environ,
        "HITL_URL": live_stack.base_url,
        "HITL_TOKEN": token,
        "HITL_RUN_ID": "example-1",
        "REFUNDS_URL": f"{target.url}/refunds",
    }
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "refunded 250 EUR on A-1" in done.stdout
    assert len(target.requests_to("/refunds")) == before + 1


def test_the_example_exits_1_when_rejected(live_stack, target, token, approver):
    before = len(target.requests_to("/refunds"))
    reviewer(approver, {"verdict": "REJECTED", "note": "No"}, run_id="example-2")
    env = {**os.environ, "HITL_URL": live_stack.base_url, "HITL_TOKEN": token, "HITL_RUN_ID": "example-2"}
    env["REFUNDS_URL"] = f"{target.url}/refunds"
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert len(target.requests_to("/refunds")) == before
