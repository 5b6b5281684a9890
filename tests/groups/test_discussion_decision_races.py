"""Races on a paused discussion, decided by the core's compare-and-set on real PostgreSQL, real threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections

from approvals.models import AuditEntry, Pause, PauseStatus, SubjectType
from approvals.timers import fire_timeout
from groups.models import GroupConversation
from harnesses.members import answering, discuss, group
from harnesses.queue_drain import run_queued_tasks
from harnesses.users import client_for, make_user

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 5
PHASES = [
    {"name": "Opinions", "type": "OPINION", "requiresApproval": True},
    {"name": "Decision", "type": "SYNTHESIS"},
]
APPROVE = {"decision": {"verdict": "APPROVED"}}


def race(callables: list[Callable[[], Any]]) -> list[Any]:
    """Run the callables at once (a barrier), each in its own thread and database connection."""
    barrier = threading.Barrier(len(callables))
    results: list[Any] = [None] * len(callables)

    def run(index: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = call()
        except BaseException as exc:  # reported as the result
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(callables)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a racer did not finish within 120 s"
    return results


def pause_of(discussion_id: str) -> Pause:
    return Pause.objects.get(subject_type=SubjectType.DISCUSSION, subject_id=discussion_id)


def decisions_of(pause: Pause) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval"))


def test_two_approvers_approving_the_same_discussion_at_once_exactly_one_wins():
    alice = make_user("alice")
    approvers = [client_for(make_user(f"approver{i}", "approver")) for i in range(2)]
    group_id = group([(answering("pat", "Ship it."), "Optimist")], PHASES)
    for _ in range(ROUNDS):
        paused = discuss(client_for(alice), group_id)
        url = f"/groups/{group_id}/conversations/{paused['discussionId']}/approve?wait=60"

        responses = race([lambda c=client, u=url: c.post(u, APPROVE, format="json") for client in approvers])

        assert sorted(r.status_code for r in responses) == [200, 409], [r.content for r in responses]
        winner, loser = sorted(responses, key=lambda r: r.status_code)
        assert winner.json()["state"] == "COMPLETED"
        assert loser.json()["code"] == "WRONG_STATE"
        pause = pause_of(paused["discussionId"])
        assert pause.status == PauseStatus.RESOLVED
        assert len(decisions_of(pause)) == 1
        assert AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.discussion.resumed").count() == 1
        discussion = GroupConversation.objects.get(pk=paused["discussionId"])
        assert [e["phase"] for e in discussion.transcript] == ["Opinions", "Decision"]  # ran on once


def test_an_approval_racing_the_timeout_is_decided_once():
    alice = make_user("alice")
    approver = client_for(make_user("approver", "approver"))
    group_id = group(
        [(answering("pat", "Ship it."), "Optimist")],
        PHASES,
        hitlConfig={"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT5M"},
    )
    for _ in range(ROUNDS):
        paused = discuss(client_for(alice), group_id)
        pause = pause_of(paused["discussionId"])
        url = f"/groups/{group_id}/conversations/{paused['discussionId']}/approve?wait=60"

        human, timer = race(
            [
                lambda u=url: approver.post(u, APPROVE, format="json"),
                lambda p=pause: fire_timeout(str(p.id), now=p.due_at + timedelta(seconds=1)),
            ]
        )
        run_queued_tasks()

        (decision,) = decisions_of(pause)
        state = GroupConversation.objects.get(pk=paused["discussionId"]).state
        if decision.actor == "approver":
            assert (human.status_code, timer, state) == (200, "no-op", "COMPLETED")
        else:
            assert (decision.actor, decision.verdict) == ("system:timeout", "REJECTED")
            assert (human.status_code, timer, state) == (409, "REJECTED", "FAILED")
        assert pause_of(paused["discussionId"]).status == PauseStatus.RESOLVED


def test_cancel_racing_a_decision_never_deadlocks():
    """A cancel racing an approval (the decision's compare-and-set, then its continuation's commit) never
    deadlocks in PostgreSQL (a 500): the cancel takes the pending pause before the discussion, as a
    decision does, and a lost one leaves the pause unlocked; it ends the pending pause, or comes after the
    decision and is a cancel request the running discussion honours. Two cancels (REST and MCP) race two
    approvers each round. Found by the R1 harness (harnesses/decision_race.py)."""
    from mcp_surface import group_tools
    from mcp_surface.server import _call

    alice = make_user("alice")
    approvers = [client_for(make_user(f"approver{i}", "approver")) for i in range(2)]
    owner = client_for(alice)
    group_id = group([(answering("pat", "Ship it."), "Optimist")], PHASES)
    for _ in range(ROUNDS * 2):
        paused = discuss(owner, group_id)
        path = f"/groups/{group_id}/conversations/{paused['discussionId']}"
        mcp_cancel = {"group_id": group_id, "conversation_id": paused["discussionId"]}

        answers = race(
            [
                lambda c=client, p=path: c.post(f"{p}/approve?wait=60", APPROVE, format="json")
                for client in approvers
            ]
            + [
                lambda p=path: owner.post(f"{p}/cancel"),
                lambda a=mcp_cancel: _call(group_tools.cancel_group_discussion, alice, a),
            ]
        )

        *rest, mcp = answers
        assert all(not isinstance(a, BaseException) for a in answers), answers
        assert all(r.status_code in (200, 409) for r in rest), [(r.status_code, r.content) for r in rest]
        assert not mcp.is_error or '"WRONG_STATE"' in mcp.content[0].text, mcp.content[0].text
        assert len(decisions_of(pause_of(paused["discussionId"]))) == 1


def test_a_delete_racing_an_approval_ends_with_one_decision_and_no_error():
    """The owner deletes a paused discussion while an approver approves it. Either the delete cancels the
    gate first (the approval loses: 409, or 404 once the discussion is gone) or the approval wins (the
    delete meets a running discussion: 409, or deletes it once it completed and the approval's answer is
    a 404). Never a 500, never two decisions; a deleted discussion leaves its ledger entries."""
    alice = make_user("alice")
    approver = client_for(make_user("approver", "approver"))
    owner = client_for(alice)
    group_id = group([(answering("pat", "Ship it."), "Optimist")], PHASES)
    for _ in range(ROUNDS * 2):
        paused = discuss(owner, group_id)
        path = f"/groups/{group_id}/conversations/{paused['discussionId']}"

        approved, deleted = race(
            [
                lambda p=path: approver.post(f"{p}/approve?wait=60", APPROVE, format="json"),
                lambda p=path: owner.delete(p),
            ]
        )

        assert not isinstance(approved, BaseException) and not isinstance(deleted, BaseException)
        assert approved.status_code in (200, 404, 409), approved.content
        assert deleted.status_code in (200, 409), deleted.content
        gone = not GroupConversation.objects.filter(pk=paused["discussionId"]).exists()
        assert gone == (deleted.status_code == 200)
        assert len(decisions_of(pause_of(paused["discussionId"]))) == 1
        if gone:
            verbs = AuditEntry.objects.filter(subject_id=paused["discussionId"]).values_list(
                "verb", flat=True
            )
            assert "hitl.discussion.deleted" in verbs
