"""An audit entry appended inside the statement of the change it records, on the head an earlier read saw
(approvals.optimistic_audit).

- The say's pause entry joins the pause's statement, and the decision's entry joins the conversation's
  move to running: no statement of their own, and the chain verifies.
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

from approvals.actors import actor_for_user
from approvals.audit import append_audit_entry, verify_ledger
from approvals.continuation_runs import decide_and_continue
from approvals.decision_input import parse_decision_body
from approvals.models import AuditEntry, AuditHead, Engine, PauseKind, SubjectType
from approvals.optimistic_audit import SeenHead
from approvals.pauses import open_pause
from conversations.models import Conversation
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


def pause_on(subject_id: uuid.UUID, seen: SeenHead) -> None:
    open_pause(
        surface=Engine.REGULAR,
        kind=PauseKind.RULE,
        subject_type=SubjectType.CONVERSATION,
        subject_id=subject_id,
        owner_id=None,
        reason="needs a look",
        hitl_config=None,
        bookmark={"workflowId": "w", "taskIndex": 0},
        seen_head=seen,
    )


@pytest.mark.django_db(transaction=True)
def test_the_says_pause_entry_is_part_of_the_pause_statement(alice_client, audit_truncate_allowed_for_flush):
    conversation_id = start(alice_client, deployed_agent())
    with CaptureQueriesContext(connection) as captured:
        assert (
            say(alice_client, conversation_id, "please delete my account").json()["state"] == "AWAITING_HUMAN"
        )

    sql = [query["sql"] for query in captured.captured_queries]
    with_entry = [s for s in sql if ENTRY in s]
    assert len(with_entry) == 1 and 'INSERT INTO "approvals_pause"' in with_entry[0], sql
    assert chain_of(uuid.UUID(conversation_id)) == [(1, "hitl.pause")]
    assert_clean(uuid.UUID(conversation_id))


@pytest.mark.django_db(transaction=True)
def test_the_decisions_entry_is_part_of_the_move_to_running(
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
    assert len(with_entry) == 1 and "SET \"state\" = 'IN_PROGRESS'" in with_entry[0], sql
    assert chain_of(uuid.UUID(conversation_id)) == [(1, "hitl.pause"), (2, "hitl.approval")]
    assert_clean(uuid.UUID(conversation_id))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("head_existed", [False, True])
def test_an_entry_on_a_head_that_moved_in_the_same_transaction_is_appended_the_locked_way(
    head_existed, audit_truncate_allowed_for_flush
):
    subject = uuid.uuid4()
    if head_existed:
        note(subject)
    with transaction.atomic():
        seen = seen_now(subject)
        note(subject)  # the head moves after the read
        with CaptureQueriesContext(connection) as captured:
            pause_on(subject, seen)

    sql = [query["sql"] for query in captured.captured_queries]
    assert len([s for s in sql if ENTRY in s]) == 2, sql  # tried with the pause, then the locked append
    expected = [*([(1, "hitl.note")] if head_existed else [])]
    expected += [(len(expected) + 1, "hitl.note"), (len(expected) + 2, "hitl.pause")]
    assert chain_of(subject) == expected
    assert_clean(subject)


@pytest.mark.django_db(transaction=True)
def test_an_entry_on_a_head_another_transaction_moved_is_appended_the_locked_way(
    audit_truncate_allowed_for_flush,
):
    subject = uuid.uuid4()
    note(subject)
    seen = seen_now(subject)
    note(subject, actor="system:elsewhere")  # committed between the read and the statement

    with transaction.atomic():
        pause_on(subject, seen)

    assert chain_of(subject) == [(1, "hitl.note"), (2, "hitl.note"), (3, "hitl.pause")]
    assert_clean(subject)


@pytest.mark.django_db(transaction=True)
def test_an_entry_whose_head_is_locked_by_an_append_in_flight_waits_and_follows_it(
    audit_truncate_allowed_for_flush,
):
    """Two real transactions: one holds the head's lock with its entry uncommitted while the other's
    statement runs on the head it read before; that statement waits for the commit, finds the head
    moved, writes nothing of its entry, and the locked append puts the entry after the other's."""
    subject = uuid.uuid4()
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
                pause_on(subject, seen)
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
    assert chain_of(subject) == [(1, "hitl.note"), (2, "hitl.note"), (3, "hitl.pause")]
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
