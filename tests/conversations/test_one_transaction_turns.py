"""Turns of agents whose tasks are all local run in one transaction (conversations.local_turns).

Rules: which documents qualify is a whitelist (fail closed); a failure inside such a turn still leaves
the conversation ERROR with the error on its step, never locked; two says racing on one conversation
are serialized by the row lock, each seeing the other's committed step and properties; nothing of a
turn that rolled back is left behind.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from conversations import turn_commits, turns
from conversations.local_turns import runs_in_one_transaction
from conversations.models import Conversation, ConversationStep
from harnesses.factories import account_bot, deployed_agent, say, start
from harnesses.users import client_for, make_user

STEP_INSERT = 'INSERT INTO "conversations_conversationstep"'


def test_only_documents_whose_every_task_is_local_qualify():
    assert runs_in_one_transaction(account_bot())
    with_llm = account_bot()
    with_llm["workflows"][0]["tasks"].append({"id": "model", "type": "llm"})
    with_http = account_bot()
    with_http["workflows"][0]["tasks"].append({"id": "call", "type": "httpcalls"})
    unknown = account_bot()
    unknown["workflows"][0]["tasks"].append({"id": "custom", "type": "registered-later"})
    second_workflow = account_bot()
    second_workflow["workflows"].append({"id": "more", "tasks": [{"id": "model", "type": "llm"}]})
    for document in (with_llm, with_http, unknown, second_workflow, {"name": "x"}, {"workflows": "main"}):
        assert not runs_in_one_transaction(document), document


@pytest.mark.django_db(transaction=True)
def test_a_local_say_is_one_transaction():
    alice_client = client_for(make_user("alice"))
    conversation_id = start(alice_client, deployed_agent())
    with CaptureQueriesContext(connection) as captured:
        answer = say(alice_client, conversation_id, "hello").json()
    # the token's statement, if any, is the credential cache's business (approvals.credential_cache)
    sql = [q["sql"] for q in captured.captured_queries if '"authtoken_token"' not in q["sql"]]
    begin = sql.index("BEGIN")
    # the conversation with its deployed version (the access check, and whether the turn is local) and
    # the pending pauses the caps allow (approvals.pause_caps) in one statement, then one transaction
    # that holds the conversation and reads its window in one statement, runs, and writes the turn's
    # result: the conversation updated once, no undone tail to delete
    assert len(sql[:begin]) == 1 and sql[-1] == "COMMIT" and sql.count("BEGIN") == 1, sql
    assert '"approvals_pause"' in sql[0], sql
    held, in_turn = sql[begin + 1], sql[begin + 1 : -1]
    assert held.startswith('SELECT c."state"') and held.endswith("FOR UPDATE OF c"), sql
    assert sum(q.count('UPDATE "conversations_conversation" SET') for q in in_turn) == 1, sql
    assert not any("DELETE" in q for q in in_turn), sql
    # the conversation's update and the new step's insert are one statement
    assert any('UPDATE "conversations_conversation" SET' in q and STEP_INSERT in q for q in in_turn), sql
    assert answer["state"] == "READY" and answer["output"] == ["Hello!"]


@pytest.mark.django_db(transaction=True)
def test_a_local_start_writes_the_conversation_once():
    """The conversation's row is inserted by the first turn's commit, as the turn left it: no insert of
    an IN_PROGRESS row that the same transaction then updates."""
    alice_client = client_for(make_user("alice"))
    agent = deployed_agent()
    with CaptureQueriesContext(connection) as captured:
        answer = alice_client.post(f"/agents/{agent}/start", format="json").json()
    sql = [q["sql"] for q in captured.captured_queries]
    # one statement inserts the conversation and its first step; nothing updates the conversation
    inserting = [q for q in sql if 'INSERT INTO "conversations_conversation" (' in q]
    assert len(inserting) == 1 and STEP_INSERT in inserting[0], sql
    assert not any('UPDATE "conversations_conversation" SET' in q for q in sql), sql
    conversation = Conversation.objects.get(pk=answer["conversationId"])
    assert (conversation.state, conversation.step_count) == ("READY", 1)
    assert answer["state"] == "READY" and answer["stepCount"] == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "text, context, error_type",
    [
        ("hello\x00there", None, "DataError"),
        ("hello \ud800", None, "UnicodeEncodeError"),
        ("hello", {"ch\x00annel": "web"}, "DataError"),
    ],
    ids=["NUL in input", "lone surrogate", "NUL in a context key"],
)
def test_failed_one_transaction_turn_never_locks_conversation(alice, alice_client, text, context, error_type):
    """What PostgreSQL refuses aborts the turn's transaction: the failure is recorded in a new one."""
    conversation_id = start(alice_client, deployed_agent())
    conversation = Conversation.objects.get(pk=conversation_id)

    result = turns.say(conversation=conversation, user=alice, user_input=text, context=context)

    assert result.conversation.state == "ERROR"
    assert Conversation.objects.get(pk=conversation_id).state == "ERROR"
    steps = ConversationStep.objects.filter(conversation_id=conversation_id).order_by("index")
    assert steps.count() == 2 and steps.last().data["error"].startswith(error_type)
    assert "\x00" not in steps.last().input
    assert say(alice_client, conversation_id, "hello").json()["output"] == ["Hello!"]


@pytest.mark.django_db(transaction=True)
def test_two_says_at_once_are_serialized_and_each_sees_the_other():
    """Real threads, real PostgreSQL: both says land, one after the other, on consecutive steps, and
    the second starts from the first one's properties (read at its claim, not at its access check)."""
    alice = make_user("alice")
    document = account_bot()
    document["workflows"][0]["tasks"].insert(
        2,
        {
            "id": "trail",
            "type": "properties",
            "setProperties": [{"name": "trail", "value": "{properties.trail}h", "actions": ["say_hello"]}],
        },
    )
    conversation_id = start(client_for(alice), deployed_agent(document))
    barrier = threading.Barrier(2)
    answers: list[Any] = [None, None]

    def run(index: int) -> None:
        try:
            client = client_for(alice)
            barrier.wait()
            answers[index] = say(client, conversation_id, "hello")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert [a.status_code for a in answers] == [200, 200], [a.content for a in answers]
    assert sorted(a.json()["stepCount"] for a in answers) == [2, 3]
    steps = list(
        ConversationStep.objects.filter(conversation_id=conversation_id)
        .order_by("index")
        .values_list("index", "input")
    )
    assert steps == [(0, ""), (1, "hello"), (2, "hello")]
    conversation = Conversation.objects.get(pk=conversation_id)
    assert conversation.state == "READY" and conversation.step_count == 3
    assert conversation.properties["trail"] == "hh"  # the second turn started from the first one's


@pytest.mark.django_db(transaction=True)
def test_a_hold_that_waited_for_another_turn_reads_its_window_afresh():
    """A turn's hold (one statement: the row locked, the window of steps) that waits for another
    transaction holding the row sees the row as that one committed it but the steps as they were before
    it; the window is then read again, and the undone tail is dropped whatever the first read said."""
    from django.db import transaction
    from django.utils import timezone

    from conversations.step_store import hold_for_turn

    alice_client = client_for(make_user("alice"))
    conversation_id = start(alice_client, deployed_agent())
    say(alice_client, conversation_id, "hello")  # steps 0 and 1
    locked, release = threading.Event(), threading.Event()
    held: list[Any] = []

    def other_turn() -> None:  # what a concurrent say commits: step 2, and the count
        try:
            with transaction.atomic():
                Conversation.objects.select_for_update().get(pk=conversation_id)
                locked.set()
                release.wait(10)
                ConversationStep.objects.create(conversation_id=conversation_id, index=2, input="other")
                Conversation.objects.filter(pk=conversation_id).update(step_count=3)
        finally:
            connections.close_all()

    def hold() -> None:
        try:
            with transaction.atomic():
                conversation = Conversation.objects.get(pk=conversation_id)
                held.append(
                    hold_for_turn(
                        conversation,
                        running="IN_PROGRESS",
                        talkable=("READY",),
                        started=timezone.now(),
                        alive_until=timezone.now(),
                    )
                )
                held.append(conversation.step_count)
        finally:
            connections.close_all()

    first = threading.Thread(target=other_turn)
    first.start()
    assert locked.wait(10)
    second = threading.Thread(target=hold)
    second.start()
    second.join(0.5)
    assert second.is_alive()  # waiting for the row
    release.set()
    first.join(10)
    second.join(10)

    turn, step_count = held
    assert step_count == 3
    assert [step.index for step in turn.window] == [0, 1, 2] and turn.window[-1].input == "other"
    assert turn.undone_tail  # not known from the first read: the new step drops whatever is there


def fail_saving_the_continued_step(monkeypatch):
    """A fault in the continuation's commit: writing the continued step (with the conversation's row, in
    one statement) raises; a new step still saves. Returns the real writer, for the test to put back."""
    real = turn_commits.commit_turn_and_step

    def failing(conversation, step, *, row=None, **kwargs):
        if row is not None:  # the continued step
            raise RuntimeError("disk on fire")
        return real(conversation, step, row=row, **kwargs)

    monkeypatch.setattr(turn_commits, "commit_turn_and_step", failing)
    return real


@pytest.mark.django_db
def test_failed_one_transaction_continuation_never_locks_conversation(
    alice_client, approver_client, monkeypatch
):
    """A fault injected into the continuation's commit rolls its transaction back whole; the failure is
    then recorded: the conversation is ERROR, the pause finished as failed (audited), the error on the step."""
    from approvals.models import AuditEntry, Pause, PauseStatus

    conversation_id = start(alice_client, deployed_agent())
    say(alice_client, conversation_id, "please delete my account")
    real_commit = fail_saving_the_continued_step(monkeypatch)
    answer = approver_client.post(
        f"/agents/{conversation_id}/resume?wait=10", {"verdict": "APPROVED"}, format="json"
    ).json()
    monkeypatch.setattr(turn_commits, "commit_turn_and_step", real_commit)

    assert answer["state"] == "ERROR"
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == PauseStatus.RESOLVED
    assert AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.continuation.failed").count() == 1
    step = ConversationStep.objects.get(conversation_id=conversation_id, index=1)
    assert step.data["error"] == "RuntimeError: disk on fire"
    assert step.output == []  # nothing of the rolled-back continuation was kept
    assert say(alice_client, conversation_id, "hello").json()["output"] == ["Hello!"]


def _paused_by_alice():
    """alice's conversation with the account bot, paused on her "please delete my account"; her client
    and an approver's."""
    alice_client, approver_client = (
        client_for(make_user("alice")),
        client_for(make_user("approver", "approver")),
    )
    conversation_id = start(alice_client, deployed_agent())
    say(alice_client, conversation_id, "please delete my account")
    return alice_client, approver_client, conversation_id


def _resume_and_capture(approver_client, conversation_id: str) -> tuple[dict, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        answer = approver_client.post(
            f"/agents/{conversation_id}/resume?wait=10", {"verdict": "APPROVED"}, format="json"
        ).json()
    return answer, [q["sql"] for q in captured.captured_queries]


def _writes_in_one_transaction(sql: list[str], *expected: str) -> None:
    """One BEGIN and one COMMIT, every write between them, and each ``expected`` write among them."""
    assert sql.count("BEGIN") == 1 and sql.count("COMMIT") == 1, sql
    begin, commit = sql.index("BEGIN"), sql.index("COMMIT")
    writes = [i for i, s in enumerate(sql) if s.split(" ", 1)[0] in ("INSERT", "UPDATE", "DELETE", "WITH")]
    assert writes and all(begin < i < commit for i in writes), sql
    for write in expected:  # alone, or a part of a statement that writes several rows
        assert any(write in sql[i] for i in writes), (write, sql)


DECISION = 'UPDATE "approvals_pause" SET "status" = \'RESOLVING\''
FINISH = 'UPDATE "approvals_pause" SET "status" = \'RESOLVED\''
DECISION_AUDIT = 'INSERT INTO "approvals_auditentry"'  # alone, or appended in the move to running
CONTINUED_STEP = 'UPDATE "conversations_conversationstep"'


@pytest.mark.django_db(transaction=True)
def test_a_quick_continuation_commits_once_with_its_decision():
    """resume?wait on an agent whose tasks are all local: the decision, its audit entry and the continued
    turn are one transaction (one commit), so no process ever sees the decision without its outcome."""
    from approvals.models import Pause

    _, approver_client, conversation_id = _paused_by_alice()
    pause = Pause.objects.get(subject_id=conversation_id)

    answer, sql = _resume_and_capture(approver_client, conversation_id)

    assert answer["state"] == "READY" and answer["output"] == ["Deletion APPROVED."]
    _writes_in_one_transaction(sql, DECISION, DECISION_AUDIT, FINISH, CONTINUED_STEP)
    assert Pause.objects.get(pk=pause.pk).status == "RESOLVED"
    # the pending pause came with the conversation and its version (the access check's one statement),
    # and was not read again: the decision's compare-and-set on its status is what decides
    reads = [q for q in sql if q.startswith("SELECT") and '"approvals_pause"' in q]
    assert len(reads) == 1 and reads[0].startswith('SELECT c."id"'), sql


@pytest.mark.django_db(transaction=True)
def test_a_quick_continuation_takes_no_savepoint():
    """The continuation in the decision's transaction writes nothing before its one statement, and any
    failure rolls the decision back with it: there is no savepoint to take or release."""
    _, approver_client, conversation_id = _paused_by_alice()

    answer, sql = _resume_and_capture(approver_client, conversation_id)

    assert answer["state"] == "READY"
    assert not [q for q in sql if "SAVEPOINT" in q], sql


@pytest.mark.django_db(transaction=True)
def test_a_failed_quick_continuation_rolls_back_its_decision_which_commits_on_its_own_then(monkeypatch):
    """The continuation fails in the decision's transaction: that transaction rolls back whole, and the
    decision is made again as for a slow continuation. It commits first (the pause RESOLVING under its
    lease), then the continuation runs in a transaction of its own, fails again, and its failure is
    recorded: the conversation ERROR, the pause finished as failed, each entry in the ledger once."""
    from approvals.models import AuditEntry, Pause

    alice_client, approver_client, conversation_id = _paused_by_alice()
    pause = Pause.objects.get(subject_id=conversation_id)
    real_commit = fail_saving_the_continued_step(monkeypatch)
    answer, sql = _resume_and_capture(approver_client, conversation_id)
    monkeypatch.setattr(turn_commits, "commit_turn_and_step", real_commit)

    assert answer["state"] == "ERROR" and answer["lastDecision"]["verdict"] == "APPROVED"
    rolled_back = sql.index("ROLLBACK")
    assert sql[:rolled_back].count("BEGIN") == 1 and "COMMIT" not in sql[:rolled_back], sql
    # the decision again, alone in its transaction, then the continuation's (rolled back) and the failure's
    again = sql[rolled_back + 1 :]
    _writes_in_one_transaction(again[: again.index("COMMIT") + 1], DECISION, DECISION_AUDIT)
    verbs = list(
        AuditEntry.objects.filter(pause_id=pause.pk).order_by("sequence").values_list("verb", flat=True)
    )
    assert verbs == ["hitl.pause", "hitl.approval", "hitl.continuation.failed"], verbs
    assert Pause.objects.get(pk=pause.pk).status == "RESOLVED"
    assert say(alice_client, conversation_id, "hello").json()["output"] == ["Hello!"]


@pytest.mark.django_db(transaction=True)
def test_a_quick_continuation_that_cannot_start_restores_its_pause_after_the_decision_commits(monkeypatch):
    """The paused turn cannot be read back (its step is gone): in the decision's transaction that rolls
    the decision back; made again, the decision commits and the continuation that cannot start restores
    the pause, audited, as for a slow continuation. The conversation awaits a decision again."""
    from approvals.models import AuditEntry, Pause, PauseStatus
    from conversations import turn_continuation

    def gone(*args, **kwargs):
        raise LookupError("the paused step is gone")

    _, approver_client, conversation_id = _paused_by_alice()
    pause = Pause.objects.get(subject_id=conversation_id)
    monkeypatch.setattr(turn_continuation, "memory_for_paused_turn", gone)
    answer = approver_client.post(
        f"/agents/{conversation_id}/resume?wait=10", {"verdict": "APPROVED"}, format="json"
    ).json()
    monkeypatch.undo()

    assert answer["state"] == "AWAITING_HUMAN"
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
    verbs = list(
        AuditEntry.objects.filter(pause_id=pause.pk).order_by("sequence").values_list("verb", flat=True)
    )
    assert verbs == ["hitl.pause", "hitl.approval", "hitl.restored"], verbs
    decided = approver_client.post(
        f"/agents/{conversation_id}/resume?wait=10", {"verdict": "APPROVED"}, format="json"
    ).json()
    assert decided["state"] == "READY" and decided["output"] == ["Deletion APPROVED."]


def failing_first_commit(monkeypatch) -> None:
    """The start's one statement fails in PostgreSQL (division by zero), which aborts a transaction
    around it; the failure's own record is written as usual."""
    real = turn_commits.insert_with_first_step
    calls = []

    def failing(conversation, step, properties):
        calls.append(conversation.pk)
        if len(calls) == 1:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1 / 0")
        return real(conversation, step, properties)

    monkeypatch.setattr(turn_commits, "insert_with_first_step", failing)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("nested", [False, True], ids=["alone", "inside a transaction"])
def test_a_start_whose_statement_fails_in_the_database_records_its_failed_first_turn(
    alice, monkeypatch, nested
):
    """A start that needs no transaction of its own still takes a savepoint inside a caller's (a group
    member's first turn, a nested agent): the failed statement then aborts only that, and the failed
    first turn is recorded in the caller's transaction, which goes on."""
    from django.db import transaction

    agent = deployed_agent()
    failing_first_commit(monkeypatch)
    with transaction.atomic() if nested else contextlib.nullcontext():
        result = turns.start_conversation(user=alice, agent_id=agent, environment="production")
        assert Conversation.objects.filter(agent_id=agent).count() == 1  # the caller's transaction goes on

    conversation = Conversation.objects.get(pk=result.conversation.pk)
    assert conversation.state == "ERROR" and result.conversation.state == "ERROR"
    assert (
        ConversationStep.objects.get(conversation=conversation).data["error"] == "DataError: division by zero"
    )
