"""At most one execution when the agent dies: an agent process (harnesses/claiming_agent.py) claims an
approved, pinned request over HTTP from a live uvicorn, is SIGKILLed before it reports the outcome, and
is started again. The restarted agent's claim is refused ``OUTCOME_UNKNOWN`` and executes nothing: the
approval is granted once, whatever the step it died at (the claim sent and its answer never read; the
grant received; the approved request executed). The target (a loopback recorder) sees the approved
request at most once, and a person who finds out what happened reports it: later claims are then
``ALREADY_CLAIMED`` with that outcome."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from approval_requests.models import ApprovalRequest
from approvals.models import AuditEntry
from harnesses.claiming_agent import REFUSED_OUTCOME_UNKNOWN
from harnesses.clusters import kill_group
from harnesses.echo_target import running_echo_target
from harnesses.live_stack import LiveStack, ServerProcess, api_user, eventually, running_stack

pytestmark = pytest.mark.django_db(transaction=True)
AGENT_SECONDS = 60


@pytest.fixture(scope="module")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveStack]:
    """uvicorn alone: nothing here needs a q-cluster (no callback URL, no timer)."""
    yield from running_stack(django_db_blocker, tmp_path_factory.mktemp("claim-crash"), qclusters=False)


def _pinned(target_url: str) -> dict[str, Any]:
    return {
        "method": "POST",
        "url": f"{target_url}/refunds",
        "headers": {"Content-Type": "application/json", "Authorization": "Bearer sk-live-abcdef123456"},
        "body": '{"orderId":"A-1","amount":250}',
        "secretHeaders": ["Authorization"],
    }


def _agent(
    live_stack: LiveStack, token: str, request_id: str, pinned: Path, state: Path, **step: str
) -> ServerProcess:
    """The agent as a process of its own (its own process group, as the crash harness spawns them)."""
    args = [sys.executable, "-m", "harnesses.claiming_agent", "--base-url", live_stack.base_url]
    args += ["--request-id", request_id, "--pinned", str(pinned), "--state-dir", str(state)]
    if step:
        args += ["--stop-after", step["stop_after"]]
    env = {**os.environ, "HITL_AGENT_TOKEN": token, "PYTHONUNBUFFERED": "1"}
    return ServerProcess.spawn(f"agent-{state.name}", args, env=env, log_dir=state.parent)


def _read(state: Path, name: str) -> Any:
    return json.loads((state / name).read_text())


@pytest.mark.parametrize("stop_after", ["claiming", "claimed", "executed"])
def test_an_agent_killed_before_reporting_is_never_granted_again(live_stack, tmp_path, stop_after):
    token = api_user("refund-bot", "agent")
    agent, approver = live_stack.client(token), live_stack.client(api_user("approver", "approver"))
    with running_echo_target() as target:
        pinned = _pinned(target.url)
        (tmp_path / "pinned.json").write_text(json.dumps(pinned))
        filing = {
            "idempotencyKey": f"crash/{stop_after}",
            "agent": "refund-bot",
            "action": {"name": "refund", "arguments": {"orderId": "A-1", "amount": 250}},
            "reason": "Refund over 100 EUR",
            "request": pinned,
        }
        filed = agent.post("/approval-requests", json=filing)
        assert filed.status_code == 201, filed.text
        request_id = filed.json()["id"]
        decided = approver.post(f"/approval-requests/{request_id}/decision", json={"verdict": "APPROVED"})
        assert decided.status_code == 200, decided.text

        first_state, second_state = tmp_path / "first", tmp_path / "second"
        first = _agent(
            live_stack, token, request_id, tmp_path / "pinned.json", first_state, stop_after=stop_after
        )
        try:
            marker = "claim.json" if stop_after == "claimed" else stop_after
            eventually(
                lambda: (first_state / marker).exists() or not first.running,
                timeout=AGENT_SECONDS,
                what=f"the agent to reach {stop_after}",
            )
            assert first.running, first.output()
            kill_group(first)  # SIGKILL to its whole process group, before it reports anything
        finally:
            first.stop()
        assert first.popen.returncode == -signal.SIGKILL

        second = _agent(live_stack, token, request_id, tmp_path / "pinned.json", second_state)
        try:
            second.popen.wait(timeout=AGENT_SECONDS)
        finally:
            second.stop()
        retried = _read(second_state, "claim.json")
        executed = target.requests_to("/refunds")

    print(
        f"killed after {stop_after}; the restarted agent's claim: {retried['status']} {retried['body'].get('code', '')}"
    )
    request = ApprovalRequest.objects.get(pk=request_id)
    claimed_entries = AuditEntry.objects.filter(subject_id=request_id, verb="hitl.request.claimed").count()
    assert claimed_entries == 1 and request.claimed_at is not None, (claimed_entries, second.output())
    if retried["status"] == 200:
        # only possible when the first claim was still in flight: the killed claim then got nothing
        assert stop_after == "claiming", retried
        assert str(request.claim_id) == retried["body"]["grant"]["claimId"]
        assert second.popen.returncode == 0 and len(executed) == 1, second.output()
        return
    assert (retried["status"], retried["body"]["code"]) == (409, "OUTCOME_UNKNOWN"), retried
    assert retried["body"]["claimedAt"]
    assert second.popen.returncode == REFUSED_OUTCOME_UNKNOWN, second.output()
    if stop_after != "claiming":
        assert str(request.claim_id) == _read(first_state, "claim.json")["body"]["grant"]["claimId"]
    # the approved request reached the target once if the first agent executed it, never from the second
    assert len(executed) == (1 if stop_after == "executed" else 0), [r.text() for r in executed]
    assert request.outcome_status == ""

    read = agent.get(f"/approval-requests/{request_id}").json()
    assert read["grant"]["claimed"] is True and read["claim"]["outcome"] is None
    assert agent.post(f"/approval-requests/{request_id}/claim", json={"request": pinned}).json()["code"] == (
        "OUTCOME_UNKNOWN"
    )
    # someone found out what happened and reports it: every later claim says so
    found_out = {"status": "succeeded" if executed else "failed", "summary": "checked by hand after a crash"}
    assert agent.post(f"/approval-requests/{request_id}/outcome", json=found_out).status_code == 200
    later = agent.post(f"/approval-requests/{request_id}/claim", json={"request": pinned}).json()
    assert (later["code"], later["outcome"]["status"]) == ("ALREADY_CLAIMED", found_out["status"])
    agent.close()
    approver.close()
