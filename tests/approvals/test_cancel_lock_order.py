"""A cancel that loses its compare-and-set to a decision leaves the pause unlocked.

Found by the timer-race harness (tests/e2e/test_live_timer_races.py, docs/reliability.md R2): a cancel
whose update of the pause waited for a decision committing kept the pause's row locked (PostgreSQL locks
the new row version before it rechecks the condition), went on to stop the running turn and waited for
the conversation, which the decision's continuation held while it waited for the pause: a deadlock, and
the approved continuation failed with it.
"""

from __future__ import annotations

import threading

import pytest
from django.db import DatabaseError, connections, transaction

from approvals.actors import actor_for_user
from approvals.decisions import cancel_pending_pause
from approvals.models import Pause, PauseStatus
from harnesses.factories import paused_conversation
from harnesses.live_stack import eventually
from harnesses.users import client_for, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def sessions_waiting_on_a_lock() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def locked_by_someone(pause: Pause) -> bool:
    try:
        with transaction.atomic():
            Pause.objects.select_for_update(nowait=True).filter(pk=pause.pk).first()
    except DatabaseError:
        return True
    return False


def test_a_cancel_that_lost_to_a_decision_leaves_the_pause_unlocked():
    alice = make_user("alice")
    pause = Pause.objects.get(subject_id=paused_conversation(client_for(alice)))
    decided, commit, cancelled, finish = (threading.Event() for _ in range(4))
    outcome: dict[str, object] = {}

    def decide() -> None:  # a decision's compare-and-set, its transaction still open
        try:
            with transaction.atomic():
                Pause.objects.filter(pk=pause.pk, status=PauseStatus.PENDING).update(
                    status=PauseStatus.RESOLVING, decided_by="approver"
                )
                decided.set()
                commit.wait(20)
        finally:
            connections.close_all()

    def cancel() -> None:  # a canceller that goes on in its transaction, as cancel_conversation does
        try:
            with transaction.atomic():
                outcome["cancelled"] = cancel_pending_pause(pause=pause, actor=actor_for_user(alice))
                cancelled.set()
                finish.wait(20)
        except BaseException as exc:  # reported below
            outcome["error"] = exc
            cancelled.set()
        finally:
            connections.close_all()

    decider, canceller = threading.Thread(target=decide), threading.Thread(target=cancel)
    decider.start()
    assert decided.wait(20)
    canceller.start()
    eventually(sessions_waiting_on_a_lock, timeout=20, what="the cancel to wait for the decision")
    commit.set()
    assert cancelled.wait(20)
    try:
        still_locked = locked_by_someone(pause)
    finally:
        finish.set()
        decider.join(20)
        canceller.join(20)

    assert "error" not in outcome, outcome
    assert outcome["cancelled"] is False  # the decision won
    assert not still_locked, "the cancel that lost still holds the pause's row lock"
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVING
