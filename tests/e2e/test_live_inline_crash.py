"""SIGKILL of the web process in the middle of an inline continuation, and of a turn, for real.

The approver's ``resume?wait`` makes uvicorn run the continuation itself; its approved action calls a
slow target. The whole uvicorn process group is killed while that call is in flight. With the default
leases (15 s, renewed every 5 s, swept every 5 s by the q-cluster's drainer) the pause is back in the
inbox within 30 s of the kill, audited, and the target saw one request. A turn killed the same way is
interrupted within 30 s. Nothing here shortens a lease: these are the settings a deployment runs.

A quick continuation (every task local) runs in the decision's own transaction: killed half way, it
leaves nothing behind, and the pause is pending at once, as if nobody had decided.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from approvals.continuation_runs import INTERRUPTED
from approvals.models import AuditEntry, Pause
from conversations.models import Conversation
from harnesses.clusters import SlowTarget, deploy_agent, kill_group, paused_conversation, with_http_call
from harnesses.clusters import slow_target as slow_target  # fixture
from harnesses.factories import account_bot
from harnesses.live_stack import LiveStack, api_user, database_url, eventually, running_stack

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]

BACK_WITHIN_SECONDS = 30.0


@pytest.fixture
def stack(django_db_setup, django_db_blocker, tmp_path) -> Iterator[LiveStack]:
    """A stack of this test's own: its web process gets killed."""
    yield from running_stack(django_db_blocker, tmp_path)


def in_background(call) -> threading.Thread:
    def run() -> None:
        try:
            call()
        except httpx.HTTPError:
            pass  # the server died under the request: that is the point

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def kill_web_and_time_until(stack: LiveStack, condition, what: str) -> float:
    assert stack.server is not None
    kill_group(stack.server)
    stack.server = None
    killed_at = time.monotonic()
    eventually(condition, timeout=BACK_WITHIN_SECONDS + 15, what=what)
    return time.monotonic() - killed_at


def test_sigkill_of_the_web_process_mid_inline_continuation_is_back_in_the_inbox_within_30s(
    stack: LiveStack, slow_target: SlowTarget
):
    slow_target.hold_seconds = 120
    admin, alice = stack.client(api_user("admin", "admin")), stack.client(api_user("alice"))
    approver = stack.client(api_user("approver", "approver"), timeout=120)
    conversation_id = paused_conversation(
        alice, deploy_agent(admin, with_http_call(account_bot(), slow_target.url))
    )
    pause = Pause.objects.get(subject_id=conversation_id)
    in_background(
        lambda: approver.post(f"/agents/{conversation_id}/resume?wait=60", json={"verdict": "APPROVED"})
    )
    assert slow_target.received.wait(30), "the inline continuation never called the target"
    running = Pause.objects.get(pk=pause.pk)
    assert running.status == "RESOLVING" and running.lease_until is not None  # claimed by the web process

    elapsed = kill_web_and_time_until(
        stack, lambda: Pause.objects.get(pk=pause.pk).status == "PENDING", "the pause to be back in the inbox"
    )

    print(f"the pause was back in the inbox {elapsed:.1f}s after the SIGKILL")
    assert elapsed <= BACK_WITHIN_SECONDS, f"back in the inbox after {elapsed:.1f}s"
    restored = AuditEntry.objects.get(pause_id=pause.pk, verb="hitl.restored")
    assert (restored.actor, restored.detail["reason"]) == ("system:recovery", INTERRUPTED)
    assert Conversation.objects.get(pk=conversation_id).state == "AWAITING_HUMAN"
    assert len(slow_target.requests) == 1
    stack.start_server()
    with stack.client(approver.headers["Authorization"].removeprefix("Token ")) as again:
        inbox = again.get("/agents/pending-approvals").json()
    assert conversation_id in [row["conversationId"] for row in inbox]
    assert len(slow_target.requests) == 1  # nothing ran it again
    for client in (admin, alice, approver):
        client.close()


def test_sigkill_of_the_web_process_mid_turn_interrupts_the_turn_within_30s(
    stack: LiveStack, slow_target: SlowTarget
):
    slow_target.hold_seconds = 120
    document = with_http_call(account_bot(hitlConfig={}), slow_target.url)
    document["workflows"][0]["tasks"][1]["rules"][0]["actions"] = [
        "confirm_deletion"
    ]  # no pause: a plain turn
    admin = stack.client(api_user("admin", "admin"))
    alice = stack.client(api_user("alice"), timeout=120)
    started = alice.post(f"/agents/{deploy_agent(admin, document)}/start")
    conversation_id = started.json()["conversationId"]
    in_background(
        lambda: alice.post(f"/agents/{conversation_id}", json={"input": "please delete my account"})
    )
    assert slow_target.received.wait(30), "the turn never called the target"
    assert Conversation.objects.get(pk=conversation_id).state == "IN_PROGRESS"

    elapsed = kill_web_and_time_until(
        stack,
        lambda: Conversation.objects.get(pk=conversation_id).state == "EXECUTION_INTERRUPTED",
        "the dead turn to be interrupted",
    )

    print(f"the dead turn was interrupted {elapsed:.1f}s after the SIGKILL")
    assert elapsed <= BACK_WITHIN_SECONDS, f"interrupted after {elapsed:.1f}s"
    entry = AuditEntry.objects.get(subject_id=conversation_id, verb="hitl.turn.interrupted")
    assert entry.actor == "system:recovery"
    assert len(slow_target.requests) == 1
    for client in (admin, alice):
        client.close()


def waiting_on_a_lock() -> bool:
    with psycopg.connect(database_url(), autocommit=True) as probe:
        row = probe.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        ).fetchone()
    return bool(row and row[0])


def test_sigkill_mid_quick_continuation_leaves_the_pause_pending_as_if_nobody_had_decided(stack: LiveStack):
    admin, alice = stack.client(api_user("admin", "admin")), stack.client(api_user("alice"))
    approver = stack.client(api_user("approver", "approver"), timeout=120)
    conversation_id = paused_conversation(alice, deploy_agent(admin, account_bot()))
    pause = Pause.objects.get(subject_id=conversation_id)

    with psycopg.connect(database_url()) as blocker:
        # Hold the paused step's row: the continuation waits for it in the decision's open transaction.
        blocker.execute(
            "SELECT 1 FROM conversations_conversationstep WHERE conversation_id = %s FOR UPDATE",
            [conversation_id],
        )
        in_background(
            lambda: approver.post(f"/agents/{conversation_id}/resume?wait=60", json={"verdict": "APPROVED"})
        )
        eventually(waiting_on_a_lock, timeout=30, what="the continuation to wait for the step's row")
        assert stack.server is not None
        kill_group(stack.server)
        stack.server = None
    # The killed backend's transaction rolls back once its client is gone; nothing of the decision stays.
    eventually(lambda: not waiting_on_a_lock(), timeout=15, what="the killed transaction to end")

    assert Pause.objects.get(pk=pause.pk).status == "PENDING"
    assert Conversation.objects.get(pk=conversation_id).state == "AWAITING_HUMAN"
    assert not AuditEntry.objects.filter(
        pause_id=pause.pk, verb__in=["hitl.approval", "hitl.restored"]
    ).exists()
    stack.start_server()
    with stack.client(approver.headers["Authorization"].removeprefix("Token ")) as again:
        assert conversation_id in [
            row["conversationId"] for row in again.get("/agents/pending-approvals").json()
        ]
        answer = again.post(f"/agents/{conversation_id}/resume?wait=10", json={"verdict": "APPROVED"}).json()
    assert answer["state"] == "READY" and answer["output"] == ["Deletion APPROVED."]
    assert AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.approval").count() == 1
    for client in (admin, alice, approver):
        client.close()
