"""The Pydantic AI adapter (``hitl_client.pydantic_ai``) with the real package against a live uvicorn and
q-clusters: a scripted model calls a gated tool, the run pauses on ``DeferredToolRequests``, the adapter
files the call and answers with the reviewer's decision. Approved: the tool runs once (one request at the
target); edited: with the approved arguments; rejected or answered with guidance: the tool does not run
and the model reads why; an ``AUTO_REJECT`` timeout denies it; a resumed run files nothing twice and never
runs the tool twice. The example script runs against the same server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hitl_client import AlreadyClaimed, AsyncHitlClient, HitlClient, OutcomeUnknown
from hitl_client.pydantic_ai import METADATA_KEY, areport_outcomes, aresults_for, report_outcomes, results_for
from pydantic import TypeAdapter
from pydantic_ai import Agent, DeferredToolRequests, ToolApproved, ToolDenied
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harnesses.echo_target import EchoTarget, running_echo_target
from harnesses.live_stack import LiveStack, api_user, eventually, running_stack
from tests.e2e.test_live_python_client import reviewer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]
EXAMPLE = Path(__file__).resolve().parents[2] / "clients" / "python" / "examples" / "pydantic_ai_refund.py"


@pytest.fixture(scope="module")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveStack]:
    yield from running_stack(django_db_blocker, tmp_path_factory.mktemp("pydantic-ai"), qclusters=True)


@pytest.fixture(scope="module")
def target() -> Iterator[EchoTarget]:
    with running_echo_target() as running:
        yield running


@pytest.fixture
def token(live_stack: LiveStack, request: pytest.FixtureRequest) -> str:
    return api_user(f"pai-{request.node.name[:40]}", "agent")


@pytest.fixture
def hitl(live_stack: LiveStack, token: str) -> Iterator[HitlClient]:
    with HitlClient(live_stack.base_url, token, agent="refund-bot") as client:
        yield client


@pytest.fixture
def approver(live_stack: LiveStack) -> Iterator[httpx.Client]:
    client = live_stack.client(api_user("approver", "approver"))
    yield client
    client.close()


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls ``refund`` once (call id ``call-1``), then answers with what came back for it."""
    last = messages[-1]
    if isinstance(last, ModelRequest):
        for part in last.parts:
            if isinstance(part, ToolReturnPart):
                return ModelResponse(parts=[TextPart(f"{part.outcome}: {part.content}")])
    return ModelResponse(
        parts=[ToolCallPart("refund", {"order_id": "A-1", "amount": 250}, tool_call_id="call-1")]
    )


def refund_agent(target: EchoTarget) -> Agent[None, str | DeferredToolRequests]:
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        FunctionModel(scripted), output_type=[str, DeferredToolRequests]
    )

    @agent.tool_plain(requires_approval=True)
    def refund(order_id: str, amount: int) -> str:
        """Refund an order."""
        httpx.post(f"{target.url}/refunds", json={"orderId": order_id, "amount": amount}).raise_for_status()
        return f"refunded {amount} on {order_id}"

    return agent


def test_an_approved_call_runs_the_tool_once_and_reports_its_outcome(hitl, approver, target):
    agent = refund_agent(target)
    before = len(target.requests_to("/refunds"))
    paused = agent.run_sync("Refund A-1")
    assert isinstance(paused.output, DeferredToolRequests)
    assert [call.tool_call_id for call in paused.output.approvals] == ["call-1"]
    assert len(target.requests_to("/refunds")) == before  # paused: nothing ran yet
    thread = reviewer(approver, {"verdict": "APPROVED"})
    results = results_for(hitl, paused.output, run_id="pai-1", reason="Refund", timeout=30)
    thread.join(5)
    assert results is not None and isinstance(results.approvals["call-1"], ToolApproved)
    assert results.approvals["call-1"].override_args is None
    resumed = agent.run_sync(message_history=paused.all_messages(), deferred_tool_results=results)
    assert resumed.output == "success: refunded 250 on A-1"
    sent = target.requests_to("/refunds")[before:]
    assert [json.loads(received.body) for received in sent] == [{"orderId": "A-1", "amount": 250}]
    assert report_outcomes(hitl, results, resumed.new_messages()) == 1
    request_id = results.metadata["call-1"][METADATA_KEY]
    claim = approver.get(f"/approval-requests/{request_id}").json()["claim"]
    assert claim["outcome"]["status"] == "succeeded"


def test_an_edit_runs_the_tool_with_the_approved_arguments(hitl, approver, target):
    agent = refund_agent(target)
    before = len(target.requests_to("/refunds"))
    paused = agent.run_sync("Refund A-1")
    assert isinstance(paused.output, DeferredToolRequests)
    reviewer(approver, {"verdict": "APPROVED", "amendedArguments": {"order_id": "A-1", "amount": 100}})
    results = results_for(hitl, paused.output, run_id="pai-2", reason="Refund", timeout=30)
    assert results is not None
    assert results.approvals["call-1"] == ToolApproved(override_args={"order_id": "A-1", "amount": 100})
    resumed = agent.run_sync(message_history=paused.all_messages(), deferred_tool_results=results)
    assert resumed.output == "success: refunded 100 on A-1"
    sent = target.requests_to("/refunds")[before:]
    assert [json.loads(received.body) for received in sent] == [{"orderId": "A-1", "amount": 100}]


def run_async_denied(live_stack: LiveStack, token: str, target: EchoTarget, run_id: str, **filing: Any):
    async def run() -> tuple[Any, Any]:
        agent = refund_agent(target)
        async with AsyncHitlClient(live_stack.base_url, token, agent="refund-bot") as client:
            paused = await agent.run("Refund A-1")
            assert isinstance(paused.output, DeferredToolRequests)
            results = await aresults_for(
                client, paused.output, run_id=run_id, reason="Refund", timeout=30, **filing
            )
            assert results is not None
            resumed = await agent.run(message_history=paused.all_messages(), deferred_tool_results=results)
            assert await areport_outcomes(client, results, resumed.new_messages()) == 0
            return results, resumed.output

    return asyncio.run(run())


def test_a_rejection_denies_the_call_with_the_reviewers_note(live_stack, token, approver, target):
    before = len(target.requests_to("/refunds"))
    reviewer(approver, {"verdict": "REJECTED", "note": "Not eligible"})
    results, output = run_async_denied(live_stack, token, target, "pai-3")
    assert isinstance(results.approvals["call-1"], ToolDenied)
    assert output == "denied: The tool call was rejected: Not eligible"
    assert len(target.requests_to("/refunds")) == before


def test_guidance_reaches_the_model_as_the_denial_message(live_stack, token, approver, target):
    before = len(target.requests_to("/refunds"))
    reviewer(approver, {"verdict": "REJECTED", "note": "Refund 100 and open a ticket", "guidance": True})
    results, output = run_async_denied(live_stack, token, target, "pai-4")
    assert results.approvals["call-1"] == ToolDenied("Refund 100 and open a ticket")
    assert output == "denied: Refund 100 and open a ticket"
    assert len(target.requests_to("/refunds")) == before


@pytest.mark.parametrize(
    ("policy", "output"),
    [
        ("AUTO_REJECT", "denied: Nobody decided the approval request in time; the tool call was rejected."),
        ("ABORT", "denied: Nobody decided the approval request in time; the tool call did not run."),
        ("AUTO_APPROVE", "success: refunded 250 on A-1"),
    ],
)
def test_a_timeout_decides_the_call_by_its_policy(hitl, target, policy, output):
    agent = refund_agent(target)
    before = len(target.requests_to("/refunds"))
    paused = agent.run_sync("Refund A-1")
    assert isinstance(paused.output, DeferredToolRequests)
    timer = {"approvalTimeout": "PT1S", "timeoutPolicy": policy}
    run_id = f"pai-timeout-{policy.lower()}"
    results = results_for(hitl, paused.output, run_id=run_id, reason="Refund", timeout=30, hitl_config=timer)
    assert results is not None
    resumed = agent.run_sync(message_history=paused.all_messages(), deferred_tool_results=results)
    assert resumed.output == output
    ran = policy == "AUTO_APPROVE"
    assert report_outcomes(hitl, results, resumed.new_messages()) == int(ran)
    assert len(target.requests_to("/refunds")) == before + int(ran)


def test_wait_false_returns_none_while_pending_and_a_resumed_run_files_and_runs_nothing_twice(
    live_stack, hitl, token, approver, target
):
    agent = refund_agent(target)
    before = len(target.requests_to("/refunds"))
    paused = agent.run_sync("Refund A-1")
    assert isinstance(paused.output, DeferredToolRequests)
    assert results_for(hitl, paused.output, run_id="pai-6", reason="Refund", wait=False) is None
    # Kept while the process is gone: the history and the pending calls.
    stored = ModelMessagesTypeAdapter.dump_json(paused.all_messages())
    stored_requests = TypeAdapter(DeferredToolRequests).dump_json(paused.output)
    pending = eventually(
        lambda: [
            item
            for item in approver.get("/approval-requests", params={"status": "PENDING"}).json()[
                "approvalRequests"
            ]
            if item["action"]["name"] == "refund"
        ],
        timeout=10,
    )
    assert len(pending) == 1
    approver.post(
        f"/approval-requests/{pending[0]['id']}/decision", json={"verdict": "APPROVED"}
    ).raise_for_status()

    # Resumed elsewhere: a fresh client and agent, the message history read back.
    history = ModelMessagesTypeAdapter.validate_json(stored)
    requests = TypeAdapter(DeferredToolRequests).validate_json(stored_requests)
    with HitlClient(live_stack.base_url, token, agent="refund-bot") as other:
        results = results_for(other, requests, run_id="pai-6", reason="Refund", wait=False)
        assert results is not None and results.metadata["call-1"][METADATA_KEY] == pending[0]["id"]
        fresh = refund_agent(target)
        resumed = fresh.run_sync(message_history=history, deferred_tool_results=results)
        report_outcomes(other, results, resumed.new_messages())
    assert len(target.requests_to("/refunds")) == before + 1

    # Once more with the same ids: the same request (nothing filed), and no approval to run it again.
    with pytest.raises(AlreadyClaimed) as again:
        results_for(hitl, requests, run_id="pai-6", reason="Refund")
    assert again.value.outcome["status"] == "succeeded"
    assert len(target.requests_to("/refunds")) == before + 1
    filed = approver.get("/approval-requests", params={"status": "APPROVED"}).json()["approvalRequests"]
    assert [item["id"] for item in filed if item["idempotencyKey"] == "pai-6/call-1"] == [pending[0]["id"]]


def test_a_run_that_died_after_the_claim_gets_outcome_unknown(hitl, approver, target):
    agent = refund_agent(target)
    paused = agent.run_sync("Refund A-1")
    assert isinstance(paused.output, DeferredToolRequests)
    reviewer(approver, {"verdict": "APPROVED"})
    assert results_for(hitl, paused.output, run_id="pai-7", reason="Refund", timeout=30) is not None
    # ... the process dies here, before the resumed run reports an outcome.
    before = len(target.requests_to("/refunds"))
    with pytest.raises(OutcomeUnknown):
        results_for(hitl, paused.output, run_id="pai-7", reason="Refund", timeout=30)
    assert len(target.requests_to("/refunds")) == before


def example(live_stack: LiveStack, token: str, target: EchoTarget, run_id: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "HITL_URL": live_stack.base_url,
        "HITL_TOKEN": token,
        "REFUND_URL": f"{target.url}/example-refunds",
        "RUN_ID": run_id,
    }
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_the_example_exits_0_once_approved_and_1_when_rejected(live_stack, token, approver, target):
    process = example(live_stack, token, target, "example-1")
    reviewer(approver, {"verdict": "APPROVED"})
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "refunded 250 EUR on order A-1" in out
    assert [json.loads(r.body) for r in target.requests_to("/example-refunds")] == [
        {"orderId": "A-1", "amount": 250}
    ]
    process = example(live_stack, token, target, "example-2")
    reviewer(approver, {"verdict": "REJECTED", "note": "No"})
    out, err = process.communicate(timeout=30)
    assert process.returncode == 1, (out, err)
    assert len(target.requests_to("/example-refunds")) == 1


def test_a_claimed_call_raises_before_the_other_approvals_are_claimed(hitl, approver):
    requests = DeferredToolRequests(
        approvals=[
            ToolCallPart("refund", {"order_id": "A-1", "amount": 1}, tool_call_id="call-a"),
            ToolCallPart("refund", {"order_id": "A-2", "amount": 2}, tool_call_id="call-b"),
        ]
    )
    assert results_for(hitl, requests, run_id="pai-8", reason="Refund", wait=False) is None
    filed = {
        item["idempotencyKey"]: item["id"]
        for item in approver.get("/approval-requests", params={"status": "PENDING"}).json()[
            "approvalRequests"
        ]
    }
    for key in ("pai-8/call-a", "pai-8/call-b"):
        approver.post(
            f"/approval-requests/{filed[key]}/decision", json={"verdict": "APPROVED"}
        ).raise_for_status()
    hitl.claim(filed["pai-8/call-b"])  # an earlier resume claimed call-b, then died
    with pytest.raises(OutcomeUnknown):
        results_for(hitl, requests, run_id="pai-8", reason="Refund")
    untouched = approver.get(f"/approval-requests/{filed['pai-8/call-a']}").json()
    assert untouched["claim"] is None and untouched["grant"]["claimed"] is False
