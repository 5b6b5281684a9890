"""An audit entry appended inside the statement of the change it records, on the head an earlier read saw
(approvals.optimistic_audit).

- The decision's entry joins the decision's statement (its compare-and-set and the conversation's move
  to running): no statement of its own, and the chain verifies.
- An entry on a head that moved since the read is not written by that statement: the locked append
  follows, and the chain stays gap-free, whether the head moved in the same transaction, before the
  statement in another one, or in another one that held the head's lock while the statement waited.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.actors import actor_for_user
from approvals.audit import append_audit_entry, append_draft, audit_draft, verify_ledger
from approvals.continuation_runs import decide_and_continue
from approvals.decision_input import parse_decision_body
from approvals.models import AuditEntry, AuditHead, Engine, SubjectType
from approvals.optimistic_audit import SeenHead
from conversations.models import Conversation, ConversationState
from conversations.resume_rows import begin_paused_turn
from conversations.selectors import decision_on_version
from harnesses.factories import deployed_agent, say, start

ENTRY = 'INSERT INTO "approvals_auditentry"'


@pytest.fixture
def audit_truncate_allowed_for_flush(transactional_db: None) -> Iterator[None]:
    """Django flushes (TRUNCATEs) the tables after a transactional test; let it past the audit trigger."""
    yield
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hitl.audit_truncate', 'allow', false)")


def chain_of(subject_id: uuid.UUID) -> list[tuple[int, str]]:
    return list(
        AuditEntry.objects.filter(subject_id=subject_id).order_by("sequence").values_list("sequence", "verb")
    )


def assert_clean(subject_id: uuid.UUID) -> None:
    report = verify_ledger(subject_type=SubjectType.CONVERSATION, subject_id=subject_id)
    assert report.clean, report.problems
    sequences = [sequence for sequence, _ in chain_of(subject_id)]
    assert sequences == list(range(1, len(sequences) + 1))


def seen_now(subject_id: uuid.UUID) -> SeenHead:
    head = AuditHead.objects.filter(subject_type=SubjectType.CONVERSATION, subject_id=subject_id).first()
    return SeenHead(False) if head is None else SeenHead(True, head.last_sequence, head.last_hash)


def note(subject_id: uuid.UUID, actor: str = "system:test") -> AuditEntry:
    return append_audit_entry(
        subject_type=SubjectType.CONVERSATION, subject_id=subject_id, verb="hitl.note", actor=actor
    )


def awaiting(client) -> uuid.UUID:
    """A conversation awaiting a decision, with no audit entry yet (its state set directly)."""
    conversation_id = uuid.UUID(start(client, deployed_agent()))
    Conversation.objects.filter(pk=conversation_id).update(state=ConversationState.AWAITING_HUMAN)
    return conversation_id


def move_to_running(conversation_id: uuid.UUID, seen: SeenHead) -> AuditEntry:
    """The decision's move to running with its entry on ``seen``, then the locked append when the
    statement did not write it (as ``approvals.decisions.record_decision`` does)."""
    draft = audit_draft(
        subject_type=SubjectType.CONVERSATION, subject_id=conversation_id, verb="hitl.approval", actor="x"
    )
    turn = begin_paused_turn(
        conversation_id,
        started=timezone.now(),
        alive_until=timezone.now(),
        appending=(seen, draft.after(seen.last_sequence, seen.last_hash)),
    )
    assert turn is not None
    if turn.appended is not None:
        return turn.appended
    assert turn.head is None  # nothing locked: the locked append takes the head itself
    return append_draft(draft)


@pytest.mark.django_db(transaction=True)
def test_the_decisions_entry_is_part_of_the_decisions_statement(
    alice_client, approver_client, audit_truncate_allowed_for_flush
):
    conversation_id = start(alice_client, deployed_agent())
    say(alice_client, conversation_id, "please delete my account")
    with CaptureQueriesContext(connection) as captured:
        answer = approver_client.post(
            f"/agents/{conversation_id}/resume?wait=10", {"verdict": "APPROVED"}, format="json"
        ).json()

    assert answer["state"] == "READY" and answer["output"] == ["Deletion APPROVED."]
    sql = [query["sql"] for query in captured.captured_queries]
    with_entry = [s for s in sql if ENTRY in s]
    assert len(with_entry) == 1, sql
    # one statement: the decision's compare-and-set, the move to running and the entry
    assert (
        "SET \"status\" = 'RESOLVING'" in with_entry[0] and "SET \"state\" = 'IN_PROGRESS'" in with_entry[0]
    )
    assert chain_of(uuid.UUID(conversation_id)) == [(1, "hitl.pause"), (2, "hitl.approval")]
    assert_clean(uuid.UUID(conversation_id))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("head_existed", [False, True])
def test_an_entry_on_the_head_it_saw_is_written_by_the_statement(
    alice_client, head_existed, audit_truncate_allowed_for_flush
):
    subject = awaiting(alice_client)
    if head_existed:
        note(subject)
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        move_to_running(subject, seen_now(subject))

    assert len([q for q in captured.captured_queries if ENTRY in q["sql"]]) == 1
    expected = [*([(1, "hitl.note")] if head_existed else [])]
    assert chain_of(subject) == [*expected, (len(expected) + 1, "hitl.approval")]
    assert_clean(subject)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("head_existed", [False, True])
def test_an_entry_on_a_head_that_moved_in_the_same_transaction_is_appended_the_locked_way(
    alice_client, head_existed, audit_truncate_allowed_for_flush
):
    subject = awaiting(alice_client)
    if head_existed:
        note(subject)
    with transaction.atomic():
        seen = seen_now(subject)
        note(subject)  # the head moves after the read
        with CaptureQueriesContext(connection) as captured:
            move_to_running(subject, seen)

    sql = [query["sql"] for query in captured.captured_queries]
    assert len([s for s in sql if ENTRY in s]) == 2, sql  # tried in the move, then the locked append
    expected = [*([(1, "hitl.note")] if head_existed else [])]
    expected += [(len(expected) + 1, "hitl.note"), (len(expected) + 2, "hitl.approval")]
    assert chain_of(subject) == expected
    assert_clean(subject)


@pytest.mark.django_db(transaction=True)
def test_an_entry_on_a_head_another_transaction_moved_is_appended_the_locked_way(
    alice_client, audit_truncate_allowed_for_flush
):
    subject = awaiting(alice_client)
    note(subject)
    seen = seen_now(subject)
    note(subject, actor="system:elsewhere")  # committed between the read and the statement

    with transaction.atomic():
        move_to_running(subject, seen)

    assert chain_of(subject) == [(1, "hitl.note"), (2, "hitl.note"), (3, "hitl.approval")]
    assert_clean(subject)


@pytest.mark.django_db(transaction=True)
def test_an_entry_whose_head_is_locked_by_an_append_in_flight_waits_and_follows_it(
    alice_client, audit_truncate_allowed_for_flush
):
    """Two real transactions: one holds the head's lock with its entry uncommitted while the other's
    statement runs on the head it read before; that statement waits for the commit, finds the head
    moved, writes nothing of its entry, and the locked append puts the entry after the other's."""
    subject = awaiting(alice_client)
    note(subject)
    seen = seen_now(subject)
    holding, errors, finished = threading.Event(), [], {}

    def in_flight() -> None:
        try:
            with transaction.atomic():
                note(subject, actor="system:in-flight")
                holding.set()
                time.sleep(0.5)  # the other statement is waiting on the head meanwhile
                finished["in_flight"] = time.monotonic()
        except BaseException as error:  # reported to the main thread, which fails the test
            errors.append(error)
            holding.set()
        finally:
            connections.close_all()

    def optimistic() -> None:
        try:
            assert holding.wait(timeout=30)
            with transaction.atomic():
                move_to_running(subject, seen)
            finished["optimistic"] = time.monotonic()
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=in_flight), threading.Thread(target=optimistic)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert not errors, errors
    assert finished["optimistic"] > finished["in_flight"]  # it waited for the other's commit
    assert chain_of(subject) == [(1, "hitl.note"), (2, "hitl.note"), (3, "hitl.approval")]
    assert AuditEntry.objects.get(subject_id=subject, sequence=2).actor == "system:in-flight"
    assert_clean(subject)


@pytest.mark.django_db(transaction=True)
def test_a_decision_on_a_head_that_moved_since_its_check_is_appended_the_locked_way(
    alice_client, approver, audit_truncate_allowed_for_flush
):
    conversation_id = start(alice_client, deployed_agent())
    say(alice_client, conversation_id, "please delete my account")
    found = decision_on_version(approver, conversation_id, with_pending=True)
    assert found.audit_head == seen_now(found.conversation.pk) and found.audit_head.last_sequence == 1
    note(found.conversation.pk)  # the head moves after the access check read it

    decide_and_continue(
        surface=Engine.REGULAR,
        subject_type=SubjectType.CONVERSATION,
        subject_id=found.conversation.pk,
        decision=parse_decision_body({"verdict": "APPROVED"}),
        actor=actor_for_user(approver),
        subject=found,
        pending=found.pending,
    )

    assert Conversation.objects.get(pk=found.conversation.pk).state == "READY"
    assert chain_of(found.conversation.pk) == [(1, "hitl.pause"), (2, "hitl.note"), (3, "hitl.approval")]
    assert_clean(found.conversation.pk)
