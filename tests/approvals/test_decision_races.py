"""Races decided by compare-and-set on real PostgreSQL, with real threads."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from approvals.actors import actor_for_user
from approvals.decision_input import DecisionInput
from approvals.decisions import record_decision
from approvals.models import AuditEntry, Engine, Pause, PauseStatus, SubjectType, Verdict
from common.errors import LostRace
from harnesses.factories import paused_conversation
from harnesses.users import client_for, make_user
from mcp_surface.answers import error_code

pytestmark = pytest.mark.django_db(transaction=True)


def _race(callables):
    barrier = threading.Barrier(len(callables))
    results: list = [None] * len(callables)

    def run(index, call):
        try:
            barrier.wait()
            results[index] = call()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(callables)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


@pytest.mark.usefixtures("continuations_queued")
def test_at_most_once_decision_twenty_concurrent_resumes_exactly_one_wins():
    alice = make_user("alice")
    approvers = [make_user(f"approver{i}", "approver") for i in range(20)]
    conversation_id = paused_conversation(client_for(alice))
    clients = [client_for(a) for a in approvers]

    def resume(client):
        return lambda: (
            client.post(
                f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json"
            ).status_code
        )

    statuses = _race([resume(c) for c in clients])
    assert sorted(statuses) == [200] + [409] * 19
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == PauseStatus.RESOLVING
    assert AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval").count() == 1


def test_resume_racing_cancel_exactly_one_wins():
    alice = make_user("alice")
    approver = make_user("approver", "approver")
    for _ in range(5):
        conversation_id = paused_conversation(client_for(alice))
        resume_client, cancel_client = client_for(approver), client_for(alice)
        statuses = _race(
            [
                lambda c=resume_client, cid=conversation_id: (
                    c.post(f"/agents/{cid}/resume", {"verdict": "APPROVED"}, format="json").status_code
                ),
                lambda c=cancel_client, cid=conversation_id: c.post(f"/agents/{cid}/cancel").status_code,
            ]
        )
        pause = Pause.objects.get(subject_id=conversation_id)
        decisions = AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval")
        assert decisions.count() == 1
        if statuses[0] == 200:
            # the decision won; the cancel then interrupted the running turn, which is allowed
            assert decisions.get().verdict == "APPROVED"
        else:
            assert statuses == [409, 200]
            assert pause.status == PauseStatus.CANCELLED and decisions.get().verdict == "CANCELLED"


@pytest.mark.django_db
@pytest.mark.usefixtures("continuations_queued")
def test_a_decision_that_loses_the_compare_and_set_is_a_lost_race_and_changes_nothing():
    """The pause was pending when this decider read it, another decision won first: LostRace (REST's 409
    WRONG_STATE; MCP's CONFLICT), and the winner's decision stands."""
    alice, approver = make_user("alice"), make_user("approver", "approver")
    conversation_id = paused_conversation(client_for(alice))
    stale = Pause.objects.get(
        subject_id=conversation_id, status=PauseStatus.PENDING
    )  # read before the winner
    assert (
        client_for(approver)
        .post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
        .status_code
        == 200
    )

    with pytest.raises(LostRace) as lost:
        record_decision(
            surface=Engine.REGULAR,
            subject_type=SubjectType.CONVERSATION,
            subject_id=stale.subject_id,
            decision=DecisionInput(verdict=Verdict.REJECTED),
            actor=actor_for_user(approver),
            pending=stale,
        )

    assert lost.value.status == 409 and lost.value.code == "WRONG_STATE"
    assert error_code(lost.value) == "CONFLICT"
    stale.refresh_from_db()
    assert stale.verdict == Verdict.APPROVED
    assert AuditEntry.objects.filter(pause_id=stale.id, verb="hitl.approval").count() == 1


def test_cancel_racing_a_decision_never_deadlocks():
    """Cancels racing resumes (a continuation committed in the decision, or after the answer) never
    deadlock in PostgreSQL (a 500): a cancel that lost the pending pause leaves it unlocked
    (``cancel_pending_pause``), so each cancel ends the pending pause, comes after the decision (200/202),
    or finds nothing left to cancel (409). Found by the R1 harness (harnesses/decision_race.py)."""
    alice = make_user("alice")
    approvers = [client_for(make_user(f"approver{i}", "approver")) for i in range(2)]
    owner = client_for(alice)
    for _ in range(10):
        conversation_id = paused_conversation(owner)
        statuses = _race(
            [
                lambda c=c, cid=conversation_id: (
                    c.post(f"/agents/{cid}/resume", {"verdict": "APPROVED"}, format="json").status_code
                )
                for c in approvers
            ]
            + [lambda cid=conversation_id: owner.post(f"/agents/{cid}/cancel").status_code] * 2
        )
        assert all(s in (200, 202, 409) for s in statuses), statuses
        pause = Pause.objects.get(subject_id=conversation_id)
        assert AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval").count() == 1
