"""Cancelling a discussion while a decision on its pause commits, or while its continuation runs: each
takes the rows in the order the other does, so they never deadlock.

Found by the timer-race harness (tests/e2e/test_live_timer_races.py, docs/reliability.md R2): the cancel
locked the discussion, then waited for the pause, which a decision held while it waited for the
discussion (``begin_resume``); PostgreSQL broke the deadlock by failing one of them (a 500 to the
reviewer, or a timer's fire lost).
"""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction

from approvals.actors import actor_for_user
from approvals.decision_input import DecisionInput
from approvals.decisions import decide_pause
from approvals.engines import handler_for
from approvals.models import AuditEntry, PauseStatus
from common.errors import WrongState
from groups.discussion_decisions import cancel_discussion
from groups.models import GroupConversation
from harnesses.live_stack import eventually
from harnesses.members import answering, discuss, group, pause_of
from harnesses.users import client_for, make_user
from tests.approvals.test_cancel_lock_order import sessions_waiting_on_a_lock

pytestmark = pytest.mark.django_db(transaction=True)

PHASES = [
    {"name": "Opinions", "type": "OPINION", "requiresApproval": True},
    {"name": "Decision", "type": "SYNTHESIS"},
]


def test_cancelling_a_discussion_while_a_decision_commits_never_deadlocks():
    alice = make_user("alice")
    group_id = group([(answering("pat", "Ship it."), "Optimist")], PHASES)
    body = discuss(client_for(alice), group_id)
    pause = pause_of(body)
    decided, go_on = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def decide() -> None:
        """A decision's two statements, as record_decision runs them: the pause's compare-and-set, then the
        discussion's (begin_resume), in one transaction."""
        try:
            with transaction.atomic():
                pause.__class__.objects.filter(pk=pause.pk, status=PauseStatus.PENDING).update(
                    status=PauseStatus.RESOLVING, decided_by="approver"
                )
                decided.set()
                go_on.wait(20)
                outcome["began"] = handler_for(pause.surface).begin_resume(pause)
        except BaseException as exc:  # reported below
            outcome["decision error"] = exc
        finally:
            connections.close_all()

    def cancel() -> None:
        try:
            outcome["discussion"] = cancel_discussion(
                user=alice, group_id=group_id, discussion_id=body["discussionId"]
            )
        except BaseException as exc:
            outcome["cancel error"] = exc
        finally:
            connections.close_all()

    decider, canceller = threading.Thread(target=decide), threading.Thread(target=cancel)
    decider.start()
    assert decided.wait(20)
    canceller.start()
    eventually(sessions_waiting_on_a_lock, timeout=20, what="the cancel to wait for the decision")
    go_on.set()
    decider.join(30)
    canceller.join(30)

    assert "decision error" not in outcome and "cancel error" not in outcome, outcome
    assert outcome["began"] is not None  # the decision won and moved the discussion on
    discussion = GroupConversation.objects.get(pk=body["discussionId"])
    assert (discussion.state, discussion.cancel_requested_by) == ("IN_PROGRESS", "alice")
    pause.refresh_from_db()
    assert pause.status == PauseStatus.RESOLVING and pause.cancel_requested_by == "alice"
    assert not AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.approval", actor="alice").exists()


def test_cancelling_a_discussion_while_its_rejection_fails_it_never_deadlocks():
    """A rejected discussion's continuation takes the discussion, then the pause, as a cancel of the
    running discussion does; it took the pause first and the two deadlocked."""
    alice = make_user("alice")
    group_id = group([(answering("pat", "Ship it."), "Optimist")], PHASES)
    body = discuss(client_for(alice), group_id)
    pause = pause_of(body)
    decide_pause(
        surface=pause.surface,
        subject_type=pause.subject_type,
        subject_id=pause.subject_id,
        decision=DecisionInput(verdict="REJECTED", note="no"),
        actor=actor_for_user(make_user("approver", "approver")),
    )
    pause.refresh_from_db()
    holding, release = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def hold_the_pause() -> None:  # e.g. a lease renewal in flight: both must wait for the pause
        try:
            with transaction.atomic():
                pause.__class__.objects.select_for_update().filter(pk=pause.pk).first()
                holding.set()
                release.wait(20)
        finally:
            connections.close_all()

    def continue_rejected() -> None:
        try:
            outcome["continued"] = handler_for(pause.surface).continue_pause(pause)
        except BaseException as exc:  # reported below
            outcome["continuation error"] = exc
        finally:
            connections.close_all()

    def cancel() -> None:
        try:
            outcome["cancelled"] = cancel_discussion(
                user=alice, group_id=group_id, discussion_id=body["discussionId"]
            )
        except WrongState as exc:  # the discussion had already failed: nothing to cancel
            outcome["cancelled"] = exc
        except BaseException as exc:
            outcome["cancel error"] = exc
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_the_pause)
    holder.start()
    assert holding.wait(20)
    continuation, canceller = threading.Thread(target=continue_rejected), threading.Thread(target=cancel)
    continuation.start()
    eventually(sessions_waiting_on_a_lock, timeout=20, what="the continuation to wait")
    canceller.start()
    eventually(lambda: sessions_waiting_on_a_lock() >= 2, timeout=20, what="the cancel to wait")
    release.set()
    for thread in (holder, continuation, canceller):
        thread.join(30)

    assert "continuation error" not in outcome and "cancel error" not in outcome, outcome
    discussion = GroupConversation.objects.get(pk=body["discussionId"])
    assert discussion.state == "FAILED"
    pause.refresh_from_db()
    assert pause.status == PauseStatus.RESOLVED
