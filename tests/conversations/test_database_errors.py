"""A database error is the database's, not the turn's.

Rules: an error raised by the database (unreachable: ``OperationalError``/``InterfaceError``) is never
recorded as a failed turn; the API answers 503 problem JSON (``UNAVAILABLE``, ``Retry-After``) and the
client re-reads before it retries. Before anything committed, nothing is consumed. When the commit
landed and only its answer was lost (commit-then-error), what landed stands once: no 409 for an input
that was taken, no second step, no second conversation in ERROR, no second decision. A slow turn that had
committed its claim is left to its lease, as after a crash.

Each test places one fault (harnesses/database_faults.py) on a real PostgreSQL connection; the random
load over the whole API is tests/conversations/test_database_faults.py.
"""

from __future__ import annotations

import time

import pytest

from approvals.models import AuditEntry, Pause, PauseStatus
from approvals.recovery import recover_expired_leases
from conversations.models import Conversation, ConversationStep
from harnesses.database_faults import one_fault
from harnesses.factories import deployed_agent, paused_conversation, say, slow_account_bot, start
from harnesses.users import client_for, make_user

STEP_INSERT = 'INSERT INTO "conversations_conversationstep"'


def assert_unavailable(response) -> None:
    assert response.status_code == 503, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "UNAVAILABLE" and response["Retry-After"] == "1"


def steps_with(conversation_id: str, text: str) -> int:
    return ConversationStep.objects.filter(conversation_id=conversation_id, input=text).count()


@pytest.mark.django_db(transaction=True)
def test_a_database_error_is_a_retryable_503_not_a_failed_turn():
    client = client_for(make_user("alice"))
    conversation_id = start(client, deployed_agent())

    with one_fault(before_sql=STEP_INSERT).injected() as fired:
        response = say(client, conversation_id, "hello")

    assert fired == ["before"]
    assert_unavailable(response)
    conversation = Conversation.objects.get(pk=conversation_id)
    assert (conversation.state, conversation.step_count) == ("READY", 1)  # nothing consumed, no ERROR
    assert steps_with(conversation_id, "hello") == 0
    assert say(client, conversation_id, "hello").json()["output"] == ["Hello!"]


@pytest.mark.django_db(transaction=True)
def test_a_say_whose_commit_landed_behind_an_error_is_stored_once_and_never_answered_409():
    client = client_for(make_user("alice"))
    conversation_id = start(client, deployed_agent())

    with one_fault(after_commit=1).injected() as fired:
        response = say(client, conversation_id, "hello")

    assert fired == ["after"]
    assert_unavailable(response)
    conversation = Conversation.objects.get(pk=conversation_id)
    assert (conversation.state, conversation.step_count) == ("READY", 2)
    assert steps_with(conversation_id, "hello") == 1
    # The client re-reads before it retries: its input is there, answered.
    snapshot = client.get(f"/agents/{conversation_id}").json()
    assert snapshot["steps"][-1]["input"] == "hello" and snapshot["output"] == ["Hello!"]


@pytest.mark.django_db(transaction=True)
def test_a_start_whose_commit_landed_behind_an_error_leaves_one_usable_conversation():
    client = client_for(make_user("alice"))
    agent_id = deployed_agent()

    with one_fault(after_commit=1).injected() as fired:
        response = client.post(f"/agents/{agent_id}/start?environment=production", format="json")

    assert fired == ["after"]
    assert_unavailable(response)
    assert list(Conversation.objects.filter(agent_id=agent_id).values_list("state", "step_count")) == [
        ("READY", 1)
    ]
    assert not ConversationStep.objects.filter(data__has_key="error").exists()


@pytest.mark.django_db(transaction=True)
def test_a_database_error_in_a_decision_rolls_it_back_whole_and_answers_503(audit_truncate_allowed_for_flush):
    """The quick continuation runs in the decision's transaction: a fault in it undoes the decision too."""
    alice, approver = make_user("alice"), make_user("approver", "approver")
    conversation_id = paused_conversation(client_for(alice))
    approver_client = client_for(approver)
    resume = f"/agents/{conversation_id}/resume?wait=5"

    with one_fault(before_sql='UPDATE "conversations_conversationstep"').injected() as fired:
        response = approver_client.post(resume, {"verdict": "APPROVED"}, format="json")

    assert fired == ["before"]
    assert_unavailable(response)
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == PauseStatus.PENDING and pause.verdict == ""
    assert Conversation.objects.get(pk=conversation_id).state == "AWAITING_HUMAN"
    assert not AuditEntry.objects.filter(verb="hitl.approval").exists()
    retried = approver_client.post(resume, {"verdict": "APPROVED"}, format="json")
    assert retried.status_code == 200 and retried.json()["state"] == "READY", retried.content


@pytest.mark.django_db(transaction=True)
def test_a_decision_whose_commit_landed_behind_an_error_is_one_decision(audit_truncate_allowed_for_flush):
    alice, approver = make_user("alice"), make_user("approver", "approver")
    conversation_id = paused_conversation(client_for(alice))
    approver_client = client_for(approver)
    resume = f"/agents/{conversation_id}/resume?wait=5"

    with one_fault(after_commit=1).injected() as fired:
        response = approver_client.post(resume, {"verdict": "APPROVED"}, format="json")

    assert fired == ["after"]
    assert_unavailable(response)
    status = approver_client.get(f"/agents/{conversation_id}/approval-status").json()
    assert status["state"] == "READY" and status["lastDecision"]["verdict"] == "APPROVED"
    retried = approver_client.post(resume, {"verdict": "APPROVED"}, format="json")
    assert retried.status_code == 409
    assert AuditEntry.objects.filter(verb="hitl.approval").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_database_error_in_a_slow_turn_leaves_it_to_its_lease_as_after_a_crash(settings):
    """A slow turn committed its claim before it ran: the 503 leaves it IN_PROGRESS under its lease,
    and recovery interrupts it once the lease ran out; it is never recorded as a failed turn."""
    settings.HITL_CONTINUATION_LEASE_SECONDS = 1
    client = client_for(make_user("alice"))
    conversation_id = start(client, deployed_agent(slow_account_bot()))

    with one_fault(before_sql=STEP_INSERT).injected() as fired:
        response = say(client, conversation_id, "hello")

    assert fired == ["before"]
    assert_unavailable(response)
    assert Conversation.objects.get(pk=conversation_id).state == "IN_PROGRESS"
    time.sleep(1.2)
    assert recover_expired_leases()["interruptedTurns"] == 1
    assert Conversation.objects.get(pk=conversation_id).state == "EXECUTION_INTERRUPTED"
    assert not ConversationStep.objects.filter(data__has_key="error").exists()
    answer = say(client, conversation_id, "hello").json()
    assert answer["state"] == "READY" and steps_with(conversation_id, "hello") == 1


@pytest.mark.django_db(transaction=True)
def test_a_database_error_in_a_quick_continuation_is_a_503_not_a_500(
    audit_truncate_allowed_for_flush,
):
    """The continuation's commit fails because the connection is gone: the error is the database's, not
    a failed turn nor a continuation that could not start, so nothing goes on querying inside the broken
    transaction (which Django refuses: a 500) and the decision is not made again: it rolls back with the
    continuation, and the answer is a 503."""
    alice, approver = make_user("alice"), make_user("approver", "approver")
    conversation_id = paused_conversation(client_for(alice))
    approver_client = client_for(approver)

    with one_fault(before_sql='SET "state" = %s, "properties" = %s').injected() as fired:
        response = approver_client.post(
            f"/agents/{conversation_id}/resume?wait=5", {"verdict": "APPROVED"}, format="json"
        )

    assert fired == ["before"]
    assert_unavailable(response)
    assert Pause.objects.get(subject_id=conversation_id).status == PauseStatus.PENDING
    assert not AuditEntry.objects.filter(verb__in=("hitl.approval", "hitl.restored")).exists()
