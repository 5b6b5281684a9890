"""A member turn of a local agent is one transaction: the member's step, the transcript entry and the
discussion's progress commit together or not at all. A slow member's turn runs outside any transaction, as
its 1:1 turn does. A cancel that comes during the last member turn of a phase is honoured before the
phase's gate or the discussion's end."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.models import AuditEntry, Pause, SubjectType
from conversations.models import Conversation, ConversationState
from groups.discussions import Run, start_discussion
from groups.models import GroupConversation
from harnesses.members import answering, discuss, group
from harnesses.users import client_for, make_user
from tests.groups.test_discussion_running import HOLD_SECONDS, held_server, slow_member, started_in_thread

__all__ = ["held_server"]  # the fixture, used by name

STEP_INSERT = 'INSERT INTO "conversations_conversationstep"'
DISCUSSION_UPDATE = 'UPDATE "groups_groupconversation"'


def transactions(sql: list[str]) -> list[list[str]]:
    """The statements of each BEGIN … COMMIT in ``sql``; a statement outside one is a transaction of its own."""
    found: list[list[str]] = []
    current: list[str] | None = None
    for statement in sql:
        if statement == "BEGIN":
            current = []
        elif statement in ("COMMIT", "ROLLBACK"):
            found.append(current or [])
            current = None
        elif current is not None:
            current.append(statement)
        else:
            found.append([statement])
    return found


@pytest.mark.django_db(transaction=True)
def test_a_local_member_turn_commits_its_step_and_the_discussions_progress_in_one_transaction():
    alice_client = client_for(make_user("alice"))
    group_id = group(
        [(answering("pat", "Ship it."), "Optimist"), (answering("carla", "Not on a Friday."), "Critic")],
        [{"name": "Opinions", "type": "OPINION"}, {"name": "Decision", "type": "SYNTHESIS"}],
    )

    with CaptureQueriesContext(connection) as captured:
        body = discuss(alice_client, group_id)

    assert body["state"] == "COMPLETED" and [e["status"] for e in body["transcript"]] == ["OK"] * 4
    turns = [
        t
        for t in transactions([q["sql"] for q in captured.captured_queries])
        if any(STEP_INSERT in statement for statement in t)
    ]
    # one transaction per member turn (a first turn writes its conversation's start step and the turn's),
    # each also writing the discussion: nothing of a member's turn commits apart from its entry (a write
    # may be a part of a statement that writes several rows: counted where it appears)
    assert len(turns) == 4
    assert [sum(s.count(STEP_INSERT) for s in t) for t in turns] == [2, 2, 1, 1]
    assert all(sum(s.count(DISCUSSION_UPDATE) for s in t) == 1 for t in turns)
    assert all(len(t) > 1 for t in turns)


@pytest.mark.django_db
def test_a_member_turn_whose_discussion_write_fails_leaves_nothing_of_the_turn(monkeypatch):
    alice = make_user("alice")
    group_id = group([(answering("pat", "Ship it."), "Optimist")], [{"name": "Opinions", "type": "OPINION"}])

    def failing(run: Run) -> None:
        raise RuntimeError("the discussion's write failed")

    monkeypatch.setattr(Run, "save_unless_cancelled", failing)

    with pytest.raises(RuntimeError):
        start_discussion(user=alice, group_id=group_id, question="q")

    discussion = GroupConversation.objects.get()
    assert discussion.state == "FAILED" and discussion.transcript == []
    assert discussion.member_conversations == {} and discussion.turn_count == 0
    assert not Conversation.objects.exists()  # the member's conversation and its steps rolled back with it


@pytest.mark.django_db
def test_a_cancel_recorded_before_a_local_turns_write_rolls_the_whole_turn_back(monkeypatch):
    alice = make_user("alice")
    pat = answering("pat", "Ship it.")
    group_id = group(
        [(pat, "Optimist"), (answering("carla", "Not on a Friday."), "Critic")],
        [{"name": "Opinions", "type": "OPINION"}],
    )
    write = Run.save_unless_cancelled

    def cancelled_during_carlas_turn(run: Run) -> None:
        if len(run.discussion.transcript) == 2:  # carla's entry added, not yet written
            GroupConversation.objects.filter(pk=run.discussion.pk).update(
                cancel_requested_at=timezone.now(), cancel_requested_by="alice"
            )
        write(run)

    monkeypatch.setattr(Run, "save_unless_cancelled", cancelled_during_carlas_turn)

    discussion = start_discussion(user=alice, group_id=group_id, question="q")

    discussion.refresh_from_db()
    assert discussion.state == "CANCELLED" and discussion.turn_count == 1
    assert [entry["role"] for entry in discussion.transcript] == ["Optimist"]
    assert list(discussion.member_conversations) == [pat]
    assert Conversation.objects.count() == 1  # carla's conversation went with her turn
    finished = AuditEntry.objects.get(subject_id=discussion.pk, verb="hitl.discussion.finished")
    assert finished.actor == "alice" and finished.detail == {"state": "CANCELLED", "turnCount": 1}


def cancel_during_the_slow_turn(alice: Any, group_id: str, held: Any) -> dict[str, Any]:
    """Start a discussion, cancel it while its slow member's turn is held, release it; the answer."""
    runner, answer = started_in_thread(alice, group_id)
    assert held.arrived.wait(HOLD_SECONDS), "the slow member's turn never started"
    # the slow turn runs outside any transaction: its claim is committed, as a 1:1 slow turn's is, and so
    # is everything of the discussion before it
    assert Conversation.objects.filter(state=ConversationState.IN_PROGRESS).count() == 1
    discussion = GroupConversation.objects.get()
    assert [entry["role"] for entry in discussion.transcript] == ["Quick"]
    cancelled = client_for(alice).post(f"/groups/{group_id}/conversations/{discussion.pk}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["cancelRequested"] is True, cancelled.content
    held.release.set()
    runner.join(HOLD_SECONDS)
    assert not runner.is_alive() and answer["status"] == 201, answer
    return answer["body"]


@pytest.mark.django_db(transaction=True)
def test_a_cancel_during_the_last_turn_of_the_last_phase_ends_the_discussion_cancelled(held_server):
    alice = make_user("alice")
    group_id = group(
        [(answering("quick", "Quick answer."), "Quick"), (slow_member(held_server.url), "Slow")],
        [{"name": "Opinions", "type": "OPINION"}],
    )

    body = cancel_during_the_slow_turn(alice, group_id, held_server)

    assert body["state"] == "CANCELLED"
    assert [entry["role"] for entry in body["transcript"]] == ["Quick", "Slow"]
    finished = AuditEntry.objects.get(subject_id=body["discussionId"], verb="hitl.discussion.finished")
    assert finished.actor == "alice" and finished.detail["state"] == "CANCELLED"


@pytest.mark.django_db(transaction=True)
def test_a_cancel_during_the_last_turn_before_a_phase_gate_ends_the_discussion_without_a_pause(held_server):
    alice = make_user("alice")
    group_id = group(
        [(answering("quick", "Quick answer."), "Quick"), (slow_member(held_server.url), "Slow")],
        [
            {"name": "Opinions", "type": "OPINION", "requiresApproval": True},
            {"name": "Decision", "type": "SYNTHESIS"},
        ],
    )

    body = cancel_during_the_slow_turn(alice, group_id, held_server)

    assert body["state"] == "CANCELLED" and body["phaseIndex"] == 0
    assert [entry["role"] for entry in body["transcript"]] == ["Quick", "Slow"]
    assert not Pause.objects.filter(
        subject_type=SubjectType.DISCUSSION, subject_id=body["discussionId"]
    ).exists()
