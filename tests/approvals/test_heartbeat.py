"""One heartbeat thread per process keeps every running claim alive (approvals.leases.kept_alive)."""

from __future__ import annotations

import threading
import time

import pytest

from approvals.leases import kept_alive

# Each renewal runs in a transaction of the heartbeat thread's own (with a lock timeout): a database is needed.
pytestmark = pytest.mark.django_db


def heartbeat_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "hitl-lease-heartbeat"]


def test_one_heartbeat_thread_renews_every_claim_held_at_once(settings):
    settings.HITL_CONTINUATION_LEASE_SECONDS = 1
    settings.HITL_LEASE_RENEW_SECONDS = 0.05
    first: list[object] = []
    second: list[object] = []
    with kept_alive(first.append, what="first"), kept_alive(second.append, what="second"):
        time.sleep(0.4)
        assert len(heartbeat_threads()) == 1
    assert len(first) >= 3 and len(second) >= 3


def test_claims_held_from_many_threads_share_the_heartbeat(settings):
    settings.HITL_CONTINUATION_LEASE_SECONDS = 1
    settings.HITL_LEASE_RENEW_SECONDS = 0.05
    renewed = [[] for _ in range(8)]

    def work(into: list[object]) -> None:
        with kept_alive(into.append, what="work"):
            time.sleep(0.3)

    workers = [threading.Thread(target=work, args=(into,)) for into in renewed]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert all(len(into) >= 2 for into in renewed), [len(into) for into in renewed]
    assert len(heartbeat_threads()) == 1


def test_leaving_waits_for_a_renewal_in_flight(settings):
    """When the block ends, its claim is no longer renewed: not even by a renewal that had started."""
    settings.HITL_CONTINUATION_LEASE_SECONDS = 1
    settings.HITL_LEASE_RENEW_SECONDS = 0.05
    started, finished = threading.Event(), []

    def slow_renew(until: object) -> None:
        started.set()
        time.sleep(0.2)
        finished.append(until)

    with kept_alive(slow_renew, what="slow"):
        assert started.wait(2)
    count = len(finished)
    assert count >= 1  # the renewal in flight finished before the block was left
    time.sleep(0.3)
    assert len(finished) == count


def test_a_failed_renewal_is_retried_at_the_next_beat(settings):
    settings.HITL_CONTINUATION_LEASE_SECONDS = 1
    settings.HITL_LEASE_RENEW_SECONDS = 0.05
    calls: list[object] = []

    def flaky(until: object) -> None:
        calls.append(until)
        if len(calls) == 1:
            raise RuntimeError("database away for a moment")

    with kept_alive(flaky, what="flaky"):
        time.sleep(0.3)
    assert len(calls) >= 3


@pytest.mark.django_db(transaction=True)
def test_a_renewal_waiting_on_a_row_lock_does_not_hold_up_the_others(settings, django_user_model):
    """A renewal blocked by a lock gives up after a second (and is retried): the other claims of the
    process are still renewed, well inside their lease."""
    from django.db import connection, transaction

    settings.HITL_CONTINUATION_LEASE_SECONDS = 10
    settings.HITL_LEASE_RENEW_SECONDS = 0.5
    user = django_user_model.objects.create(username="locked")
    locked, release = threading.Event(), threading.Event()

    def hold_the_row() -> None:
        with transaction.atomic():
            django_user_model.objects.select_for_update().get(pk=user.pk)
            locked.set()
            release.wait(10)
        connection.close()

    holder = threading.Thread(target=hold_the_row)
    holder.start()
    assert locked.wait(5)
    others: list[object] = []
    try:
        with (
            kept_alive(
                lambda until: django_user_model.objects.filter(pk=user.pk).update(last_login=until),
                what="blocked",
            ),
            kept_alive(others.append, what="other"),
        ):
            time.sleep(5.5)  # about three beats at 1.5 s; two are asked, so a loaded machine still passes
    finally:
        release.set()
        holder.join()
    # every 0.5 s plus the blocked renewal's 1 s: about every 1.5 s, well inside the 10 s lease; without
    # the lock timeout the blocked renewal would stall them all until the lock went (none at all here)
    assert len(others) >= 2, others


def waiting_on_a_row_lock() -> bool:
    from django.db import connections

    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        return bool(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_a_continuation_s_lease_renewal_never_deadlocks_with_its_commit(settings, alice_client):
    """The continuation's commit locks the conversation, then the pause (conversations.turns._commit,
    finish_pause). A renewal waiting for the conversation's row while that commit holds it must hold no
    lock the commit needs next: the pause's lease is renewed in a transaction of its own. (Found by the
    crash-kill harness, R3: renewing both in one transaction deadlocked, and PostgreSQL aborted the
    approved turn as the victim: "OperationalError: deadlock detected", the turn ERROR.)"""
    from django.db import DatabaseError, connection, transaction

    from approvals.continuation_runs import continuation_kept_alive
    from approvals.decisions import finish_pause
    from approvals.leases import lease_expiry
    from approvals.models import Pause, PauseStatus
    from conversations.models import Conversation
    from harnesses.factories import paused_conversation

    settings.HITL_CONTINUATION_LEASE_SECONDS = 10
    settings.HITL_LEASE_RENEW_SECONDS = 0.1
    conversation_id = paused_conversation(alice_client)
    Pause.objects.filter(subject_id=conversation_id).update(
        status=PauseStatus.RESOLVING, lease_until=lease_expiry()
    )
    Conversation.objects.filter(pk=conversation_id).update(state="IN_PROGRESS")
    pause = Pause.objects.get(subject_id=conversation_id)
    subject_locked, renewal_waiting = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def commit_as_a_continuation_does() -> None:
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '500ms'")  # shorter than deadlock_timeout (1 s)
                Conversation.objects.filter(pk=conversation_id).update(state="READY")
                subject_locked.set()
                renewal_waiting.wait(10)
                finish_pause(pause=pause, outcome="completed")
            outcome["committed"] = True
        except DatabaseError as error:
            outcome["error"] = f"{type(error).__name__}: {error}"
        finally:
            connection.close()

    committer = threading.Thread(target=commit_as_a_continuation_does)
    committer.start()
    try:
        assert subject_locked.wait(5)
        with continuation_kept_alive(pause):
            deadline = time.monotonic() + 5
            while not waiting_on_a_row_lock() and time.monotonic() < deadline:
                time.sleep(0.01)
            renewal_waiting.set()  # the heartbeat waits for the conversation's row: now the commit goes on
            committer.join(10)
    finally:
        renewal_waiting.set()
        committer.join(10)
    assert outcome == {"committed": True}
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVED
