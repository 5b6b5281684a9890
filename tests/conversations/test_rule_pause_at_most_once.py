"""At most once for rule pauses: a continuation killed mid-way and approved again never sends an http call
twice (toolgate.step_journal).

The crash is real: the approved continuation runs in a child process (``run_continuation``, as a q-cluster
worker runs it) against the test database; the loopback server holds its second call open, and the child
is SIGKILLed while that request is in flight (its claim committed, its result never recorded). Crash
recovery (approvals.recovery) then finds the expired lease and puts the pause back to PENDING, and a
reviewer approves again in this process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

from approvals.models import AuditEntry, Pause, PauseStatus
from approvals.recovery import recover_expired_leases
from conversations.models import ConversationStep
from harnesses.factories import account_bot, deployed_agent, paused_conversation
from harnesses.queue_drain import run_queued_tasks
from tests.approvals.test_admin_inbox import logged_in, page
from tests.conversations.conftest import LoopbackServer
from toolgate.models import JournalEntry, JournalStatus, JournalStepKind

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("continuations_queued")]

ROOT = Path(__file__).resolve().parents[2]
HELD_SECONDS = 20.0  # the loopback server holds the slow call this long: the kill lands inside it
CHILD = (
    "import sys, django; django.setup()\n"
    "from approvals.continuation_runs import run_continuation\n"
    "run_continuation(sys.argv[1])\n"
)


def notifying_bot(server: LoopbackServer, prefix: str = "") -> dict:
    """The account bot whose approved deletion fires two http calls: /notify, then /audit-sink (either
    held open by the server when the test wants the crash window there); ``prefix`` keeps rounds apart."""
    document = account_bot()
    document["workflows"][0]["tasks"].insert(
        2,
        {
            "id": "notify",
            "type": "httpcalls",
            "targetServerUrl": server.url,
            "calls": [
                {
                    "name": "call_notify",
                    "actions": ["confirm_deletion"],
                    "request": {
                        "method": "POST",
                        "path": f"{prefix}/notify",
                        "headers": {"Authorization": "Bearer sk-live-abcdefghijklmnopqrstuvwx"},
                        "body": {"text": "account deleted"},
                    },
                },
                {
                    "name": "call_audit_sink",
                    "actions": ["confirm_deletion"],
                    "request": {
                        "method": "POST",
                        "path": f"{prefix}/audit-sink",
                        "body": {"event": "deleted"},
                    },
                },
            ],
        },
    )
    return document


def resume(client, conversation_id: str, note: str = "ok"):
    response = client.post(
        f"/agents/{conversation_id}/resume", {"verdict": "APPROVED", "note": note}, format="json"
    )
    assert response.status_code == 200, response.content
    return response


def sent(server: LoopbackServer) -> list[tuple[str, str]]:
    return [(request.method, request.path) for request in server.received]


def eventually(check, *, timeout: float = 20.0, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def database_url_of_this_test() -> str:
    """The database this test runs on (wherever tests/conftest.py found or started PostgreSQL)."""
    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="") + (
        f":{quote(db['PASSWORD'], safe='')}" if db["PASSWORD"] else ""
    )
    return f"postgres://{credentials}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def crash_the_continuation(pause: Pause, server: LoopbackServer, held_path: str) -> None:
    """Run the queued continuation in a child process and SIGKILL it while ``held_path`` is in flight,
    then let its 1 s lease run out and run the crash recovery sweep: the pause is PENDING again."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "hitl_project.settings.test",
        "DATABASE_URL": database_url_of_this_test(),
        "HITL_CONTINUATION_LEASE_SECONDS": "1",
        "HITL_LEASE_RENEW_SECONDS": "0.2",
        "HITL_HTTP_TIMEOUT_SECONDS": "60",
    }
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(pause.pk)], cwd=ROOT, env=env, start_new_session=True
    )
    try:
        eventually(lambda: ("POST", held_path) in sent(server), what="the held call to reach the server")
        entry = JournalEntry.objects.get(pause_epoch=pause.epoch, path=held_path)
        assert entry.status == JournalStatus.EXECUTING  # the claim committed before the request was sent
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    eventually(
        lambda: recover_expired_leases().get("restoredContinuations", 0) == 1,
        timeout=10,
        what="recovery to restore the pause",
    )
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


def crashed_pause(
    alice_client, approver_client, server: LoopbackServer, *, held: str = "audit-sink", prefix: str = ""
) -> tuple[str, Pause]:
    """A paused conversation approved once, its continuation killed while ``{prefix}/{held}`` was in
    flight, and restored to PENDING by recovery."""
    server.respond(f"{prefix}/{held}", json_body={"ok": True}, delay_seconds=HELD_SECONDS)
    conversation_id = paused_conversation(alice_client, deployed_agent(notifying_bot(server, prefix)))
    pause = Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)
    resume(approver_client, conversation_id, "first approval")
    crash_the_continuation(pause, server, f"{prefix}/{held}")
    return conversation_id, pause


def test_a_normal_cycle_sends_each_rule_http_call_exactly_once(
    alice_client, approver_client, loopback_server
):
    conversation_id = paused_conversation(alice_client, deployed_agent(notifying_bot(loopback_server)))
    assert sent(loopback_server) == []
    resume(approver_client, conversation_id)
    run_queued_tasks()
    assert sent(loopback_server) == [("POST", "/notify"), ("POST", "/audit-sink")]
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == PauseStatus.RESOLVED
    journal = JournalEntry.objects.filter(pause_epoch=pause.epoch).order_by("claimed_at")
    assert [(e.tool_name, e.step_kind, e.status, e.method, e.path) for e in journal] == [
        ("call_notify", JournalStepKind.HTTP_CALL, JournalStatus.EXECUTED, "POST", "/notify"),
        ("call_audit_sink", JournalStepKind.HTTP_CALL, JournalStatus.EXECUTED, "POST", "/audit-sink"),
    ]
    snapshot = alice_client.get(f"/agents/{conversation_id}").json()
    assert snapshot["state"] == "READY"


def test_a_rule_http_call_that_finished_is_replayed_not_sent_again_on_re_approval(
    alice_client, approver_client, loopback_server
):
    loopback_server.respond("/notify", json_body={"id": "n-1"})
    conversation_id, pause = crashed_pause(alice_client, approver_client, loopback_server)
    assert sent(loopback_server) == [("POST", "/notify"), ("POST", "/audit-sink")]
    notify = JournalEntry.objects.get(pause_epoch=pause.epoch, tool_name="call_notify")
    assert notify.status == JournalStatus.EXECUTED  # it finished before the kill

    resume(approver_client, conversation_id, "second approval")
    run_queued_tasks()

    assert sent(loopback_server) == [("POST", "/notify"), ("POST", "/audit-sink")]  # nothing sent again
    step = alice_client.get(f"/agents/{conversation_id}").json()
    assert step["state"] == "READY", step
    outputs = pause_step_outputs(conversation_id)
    assert outputs["call_notify"] == {"status": 200, "body": {"id": "n-1"}}  # the recorded result, replayed
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVED


def test_a_rule_http_call_claimed_but_not_recorded_is_not_sent_again_and_is_outcome_unknown(
    alice_client, approver_client, loopback_server
):
    conversation_id, pause = crashed_pause(alice_client, approver_client, loopback_server)
    held = JournalEntry.objects.get(pause_epoch=pause.epoch, tool_name="call_audit_sink")
    assert held.status == JournalStatus.EXECUTING

    resume(approver_client, conversation_id, "second approval")
    run_queued_tasks()

    assert [path for _, path in sent(loopback_server)].count("/audit-sink") == 1  # never sent twice
    outputs = pause_step_outputs(conversation_id)
    assert outputs["call_audit_sink"]["outcomeUnknown"] is True
    assert "outcome unknown" in outputs["call_audit_sink"]["error"]
    audited = AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.step.outcome_unknown").get()
    assert audited.detail == {"step": "call_audit_sink", "method": "POST", "path": "/audit-sink"}
    assert JournalEntry.objects.get(pk=held.pk).status == JournalStatus.EXECUTING  # still unknown, as it is


def test_outcome_unknown_shows_on_approval_status_and_the_admin_page(
    alice_client, approver_client, approver, loopback_server
):
    conversation_id, pause = crashed_pause(alice_client, approver_client, loopback_server)

    status = approver_client.get(f"/agents/{conversation_id}/approval-status").json()
    assert status["pauseId"] == str(pause.pk) and status["state"] == "AWAITING_HUMAN"
    unknown = status["pauseDetails"]["outcomeUnknown"]
    assert [{k: v for k, v in step.items() if k != "claimedAt"} for step in unknown] == [
        {"step": "call_audit_sink", "method": "POST", "path": "/audit-sink"}
    ]
    assert unknown[0]["claimedAt"].endswith("Z")
    assert "sk-live" not in str(status) and "deleted" not in str(status)  # no headers, no bodies

    html = logged_in(approver).get(page(pause)).content.decode()
    assert 'id="hitl-outcome-unknown"' in html
    assert "call_audit_sink" in html and "POST /audit-sink" in html and "the outcome is unknown" in html
    assert "call_notify" not in html.split('id="hitl-outcome-unknown"')[1].split("</div>")[0]


def test_a_rule_pause_with_no_interrupted_run_shows_no_outcome_unknown(alice_client, approver_client):
    conversation_id = paused_conversation(alice_client)
    status = approver_client.get(f"/agents/{conversation_id}/approval-status").json()
    assert status["pauseDetails"]["outcomeUnknown"] == []


def pause_step_outputs(conversation_id: str) -> dict:
    return ConversationStep.objects.filter(conversation_id=conversation_id).order_by("-index").first().outputs


ROUNDS = int(os.environ.get("HITL_AT_MOST_ONCE_ROUNDS", "1"))


def test_crash_rounds_never_send_a_rule_http_call_twice(alice_client, approver_client, loopback_server):
    """The harness (full size: bench/rule_pause_at_most_once.py sets HITL_AT_MOST_ONCE_ROUNDS): each round
    kills a continuation while one of its two calls is in flight (the first call in even rounds, the
    second in odd ones), recovers, approves again; every call reaches the server at most once, and a call
    the dead run never claimed is sent exactly once by the second."""
    sends = 0
    for round_number in range(ROUNDS):
        prefix, held = f"/r{round_number}", ("notify", "audit-sink")[round_number % 2]
        conversation_id, pause = crashed_pause(
            alice_client, approver_client, loopback_server, held=held, prefix=prefix
        )
        resume(approver_client, conversation_id, "second approval")
        run_queued_tasks()
        paths = [path for _, path in sent(loopback_server) if path.startswith(f"{prefix}/")]
        assert sorted(paths) == [f"{prefix}/audit-sink", f"{prefix}/notify"], (round_number, paths)
        outputs = pause_step_outputs(conversation_id)
        unknown = "call_notify" if held == "notify" else "call_audit_sink"
        assert outputs[unknown].get("outcomeUnknown") is True, (round_number, outputs)
        assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVED
        sends += len(paths)
    print(f"\nat-most-once rounds: {ROUNDS} crashes, {sends} requests for {2 * ROUNDS} calls, 0 sent twice")
