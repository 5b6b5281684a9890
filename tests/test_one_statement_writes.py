"""Writes the hot path makes as parts of one statement land together, and only when the compare-and-set
that leads them won (decision record 0006).

- ``rows.insert_together``: rows inserted as one statement, each as ``rows.insert`` would write it; a
  row that fails takes the others with it.
- ``approvals.pause_rows.insert_pause``: the pause with its timer's schedule's key, and its subject's
  audit head locked until the transaction ends.
- ``approvals.timer_arming.decision_write``: a decision that lost deletes no timer.
- ``conversations.step_store.commit_turn_and_step``: a turn that lost its conversation writes no step
  and ends no pause.
- ``conversations.resume_rows.begin_paused_turn``: a decision's move of its conversation to running
  locks the conversation's audit head and reads the window a fresh read gives; on a conversation not
  awaiting it writes and locks nothing more; joined to the decision's own writes, it moves nothing when
  the decision lost.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_q.models import Schedule

from approvals.audit import append_audit_entry
from approvals.decisions import finishing
from approvals.models import AuditHead, Pause, PauseKind, PauseStatus, SubjectType
from approvals.pause_rows import insert_pause
from approvals.timer_arming import decision_write, timer_name, timer_schedule
from common import rows
from conversations.models import Conversation, ConversationState, ConversationStep
from conversations.pipeline.conversation_memory import Step
from conversations.resume_rows import begin_paused_turn
from conversations.step_store import commit_turn_and_step, memory_window, newest_steps
from harnesses.factories import account_bot, deployed_agent, say, start

TIMED = {"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT1H"}


def fields_of(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def paused(client, **hitl_config) -> tuple[str, Pause]:
    conversation_id = start(
        client, deployed_agent(account_bot(hitlConfig=hitl_config) if hitl_config else None)
    )
    say(client, conversation_id, "please delete my account")
    return conversation_id, Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)


def locked_elsewhere(table: str, row_id) -> bool:
    """Whether another session finds the row locked (``FOR UPDATE NOWAIT``)."""
    database = connection.settings_dict["NAME"]
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname=database) as other:
        try:
            other.execute(f"SELECT 1 FROM {table} WHERE id = %s FOR UPDATE NOWAIT", [row_id])
        except psycopg.errors.LockNotAvailable:
            return True
    return False


def new_step(conversation: Conversation, index: int) -> ConversationStep:
    return ConversationStep(conversation=conversation, index=index, input="hi", output=["Hello!"])


@pytest.mark.django_db
def test_rows_inserted_together_are_what_each_insert_writes(alice_client, monkeypatch):
    conversation_id = start(alice_client, deployed_agent())
    conversation = Conversation.objects.get(pk=conversation_id)
    copy = Conversation.objects.get(pk=conversation_id)
    together = [Conversation(**{**fields_of(copy), "id": uuid.uuid4()})]
    together.append(new_step(together[0], 0))
    rows.insert_together(*together)
    with monkeypatch.context() as orm:  # the same rows by the ORM's own inserts
        orm.setattr(rows, "on_postgresql", lambda: False)
        alone = [Conversation(**{**fields_of(conversation), "id": uuid.uuid4()})]
        alone.append(new_step(alone[0], 0))
        rows.insert_together(*alone)

    assert together[1].pk is not None and not together[1]._state.adding
    for mine, theirs in zip(together, alone, strict=True):
        read, expected = type(mine).objects.get(pk=mine.pk), type(theirs).objects.get(pk=theirs.pk)
        differ = {"id", "conversation_id", "created_at", "updated_at"}  # a key of its own, now
        assert all(getattr(read, name, True) is not None for name in differ)
        assert {k: v for k, v in fields_of(read).items() if k not in differ} == {
            k: v for k, v in fields_of(expected).items() if k not in differ
        }


@pytest.mark.django_db
def test_rows_inserted_together_land_together_or_not_at_all(alice_client):
    conversation = Conversation.objects.get(pk=start(alice_client, deployed_agent()))
    another = Conversation(**{**fields_of(conversation), "id": uuid.uuid4()})
    clash = new_step(conversation, 0)  # the start step is there already: (conversation, index) is unique

    with pytest.raises(IntegrityError), transaction.atomic():
        rows.insert_together(another, clash)

    assert not Conversation.objects.filter(pk=another.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_a_pause_is_written_with_its_timer_and_locks_its_subjects_audit_head(alice_client):
    conversation_id, first = paused(alice_client, **TIMED)
    assert Schedule.objects.get(pk=first.schedule_id).name == timer_name(first.id)  # as say wrote it
    Pause.objects.filter(pk=first.pk).update(status=PauseStatus.RESOLVED)  # another pause may open
    head = AuditHead.objects.get(subject_id=conversation_id)  # committed by say: another session sees it
    pause = Pause(
        surface=first.surface,
        kind=PauseKind.RULE,
        subject_type=SubjectType.CONVERSATION,
        subject_id=uuid.UUID(conversation_id),
        reason="again",
        timeout_policy=first.timeout_policy,
        approval_timeout=first.approval_timeout,
        paused_at=timezone.now(),
        due_at=timezone.now(),
    )
    schedule = timer_schedule(pause)

    with pytest.raises(RuntimeError, match="rolled back"), transaction.atomic():
        locked = insert_pause(pause, schedule)
        assert (locked.pk, locked.last_sequence) == (head.pk, head.last_sequence)
        assert Schedule.objects.get(pk=pause.schedule_id).name == timer_name(pause.id)
        assert locked_elsewhere(AuditHead._meta.db_table, head.pk)
        raise RuntimeError("rolled back")

    assert not Pause.objects.filter(pk=pause.pk).exists()
    assert not Schedule.objects.filter(name=timer_name(pause.id)).exists()


@pytest.mark.django_db
def test_a_pause_appends_to_the_audit_head_it_locked(alice_client):
    conversation_id, pause = paused(alice_client)
    head = AuditHead.objects.get(subject_id=conversation_id)
    assert head.last_sequence == 1  # the hitl.pause entry moved the head it had locked
    with pytest.raises(ValueError, match="another subject"):
        append_audit_entry(
            subject_type=SubjectType.CONVERSATION,
            subject_id=uuid.uuid4(),
            verb="hitl.note",
            actor="system:test",
            head=head,
        )


@pytest.mark.django_db
@pytest.mark.parametrize("on_postgresql", [True, False], ids=["one statement", "the ORM"])
def test_a_decision_that_lost_deletes_no_timer(alice_client, monkeypatch, on_postgresql):
    monkeypatch.setattr(rows, "on_postgresql", lambda: on_postgresql)
    _, pause = paused(alice_client, **TIMED)
    decided = {"status": PauseStatus.RESOLVING, "verdict": "APPROVED", "decided_at": timezone.now()}
    Pause.objects.filter(pk=pause.pk).update(status=PauseStatus.CANCELLED)  # another decision won

    assert not decision_write(
        pause, where={"id": pause.pk, "status": PauseStatus.PENDING}, values=decided
    ).run()
    assert Schedule.objects.filter(pk=pause.schedule_id).exists()

    Pause.objects.filter(pk=pause.pk).update(status=PauseStatus.PENDING)
    assert decision_write(pause, where={"id": pause.pk, "status": PauseStatus.PENDING}, values=decided).run()
    assert not Schedule.objects.filter(pk=pause.schedule_id).exists()
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVING


@pytest.mark.django_db
@pytest.mark.parametrize("on_postgresql", [True, False], ids=["one statement", "the ORM"])
def test_a_turn_that_lost_its_conversation_writes_no_step_and_ends_no_pause(
    alice_client, monkeypatch, on_postgresql
):
    monkeypatch.setattr(rows, "on_postgresql", lambda: on_postgresql)
    conversation_id, pause = paused(alice_client)
    Pause.objects.filter(pk=pause.pk).update(status=PauseStatus.RESOLVING)
    conversation = Conversation.objects.get(pk=conversation_id)  # AWAITING_HUMAN: not the turn's
    row = ConversationStep.objects.get(conversation_id=conversation_id, index=1)
    step = Step(input=row.input, output=["continued"])

    def commit(**kwargs):
        ending = finishing(pause)
        return commit_turn_and_step(
            conversation,
            step,
            running=ConversationState.IN_PROGRESS,
            state=ConversationState.READY,
            properties={},
            then=(ending.sql, ending.params),
            **kwargs,
        )

    assert commit(row=row) is None and commit() is None
    assert ConversationStep.objects.filter(conversation_id=conversation_id).count() == 2
    assert ConversationStep.objects.get(pk=row.pk).output != ["continued"]
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVING

    Conversation.objects.filter(pk=conversation_id).update(state=ConversationState.IN_PROGRESS)
    written = commit(row=row)
    assert written is not None and written[1] == 1
    assert ConversationStep.objects.get(pk=row.pk).output == ["continued"]
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVED
    assert Conversation.objects.get(pk=conversation_id).state == ConversationState.READY


@pytest.mark.django_db(transaction=True)
def test_a_decisions_move_to_running_locks_the_head_and_reads_the_paused_turn(alice_client):
    conversation_id, _ = paused(alice_client)
    say_more = start(alice_client, deployed_agent())  # another conversation's rows are never read
    say(alice_client, say_more, "hello")
    head = AuditHead.objects.get(subject_id=conversation_id)
    conversation_table = Conversation._meta.db_table

    with transaction.atomic():
        turn = begin_paused_turn(
            uuid.UUID(conversation_id), started=timezone.now(), alive_until=timezone.now()
        )
        fresh = newest_steps(conversation_id, memory_window() + 1)
        assert turn is not None
        assert (turn.head.pk, turn.head.last_sequence, turn.head.last_hash) == (
            head.pk,
            head.last_sequence,
            head.last_hash,
        )
        assert [fields_of(step) for step in turn.window] == [fields_of(step) for step in fresh]
        assert [step.index for step in turn.window] == [0, 1]
        assert locked_elsewhere(AuditHead._meta.db_table, head.pk)
        assert locked_elsewhere(conversation_table, conversation_id)
        assert Conversation.objects.get(pk=conversation_id).state == ConversationState.IN_PROGRESS

    with transaction.atomic():  # IN_PROGRESS now: not awaiting, so nothing is written or locked
        assert (
            begin_paused_turn(uuid.UUID(conversation_id), started=timezone.now(), alive_until=timezone.now())
            is None
        )
        assert not locked_elsewhere(AuditHead._meta.db_table, head.pk)


@pytest.mark.django_db(transaction=True)
def test_a_decision_joined_to_the_move_to_running_moves_nothing_when_it_lost(alice_client):
    """``begin_paused_turn(decision=...)``: the decision's compare-and-set, its timer's delete and the
    conversation's move run as one statement, and the conversation moves only when the decision won."""
    conversation_id, pause = paused(alice_client, **TIMED)
    decided = {"status": PauseStatus.RESOLVING, "verdict": "APPROVED", "decided_at": timezone.now()}
    where = {"id": pause.pk, "status": PauseStatus.PENDING}
    Pause.objects.filter(pk=pause.pk).update(status=PauseStatus.CANCELLED)  # another decision won

    def begin():
        return begin_paused_turn(
            uuid.UUID(conversation_id),
            started=timezone.now(),
            alive_until=timezone.now(),
            decision=decision_write(pause, where=where, values=decided),
        )

    with transaction.atomic():
        assert begin() is None
    assert Conversation.objects.get(pk=conversation_id).state == ConversationState.AWAITING_HUMAN
    assert Schedule.objects.filter(pk=pause.schedule_id).exists()
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.CANCELLED

    Pause.objects.filter(pk=pause.pk).update(status=PauseStatus.PENDING)
    with CaptureQueriesContext(connection) as captured, transaction.atomic():
        turn = begin()
    assert turn is not None and turn.head is not None
    assert len([q for q in captured.captured_queries if q["sql"].startswith("WITH")]) == 1
    assert Conversation.objects.get(pk=conversation_id).state == ConversationState.IN_PROGRESS
    assert not Schedule.objects.filter(pk=pause.schedule_id).exists()
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.RESOLVING
