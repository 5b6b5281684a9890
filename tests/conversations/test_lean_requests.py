"""The approval cycle's requests read what they need once and answer from what they hold.

- The token and the caller's roles come in one statement, read on every request (a role taken away
  counts on the next one).
- A turn and an inline continuation answer from the memory they just committed, and the answer is
  the one a fresh read gives.
- Each request of the cycle stays within its statement budget (a count, not a timing: it fails when a
  change adds a query to the hot path).
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext

from harnesses.factories import deployed_agent, say, start
from harnesses.users import client_for, make_user

pytestmark = pytest.mark.django_db

# start, say (pauses), resume?wait (decides and continues here): statements, BEGIN and COMMIT included.
# - start and say: the statement that finds what the turn runs on (start: the deployed version; say: the
#   conversation with it) also counts the pending pauses the caps allow (approvals.pause_caps); a local
#   turn writes its conversation once, with its step in the same statement (start inserts both as its
#   first turn left them, a statement that needs no transaction of its own; say holds the row and reads
#   its window in one statement, and its commit updates the row and appends the step in one more,
#   deleting no undone tail it does not have). A pause is one more statement with its timer's schedule
#   and the lock on the audit head, and its audit entry one more.
# - resume: the pending pause and the audit head come with the access check's read of the conversation;
#   the decision's compare-and-set deletes the timer's schedule, and the conversation's move to running
#   appends the decision's audit entry on that head and reads the paused turn's window, all in one
#   statement (conversations.resume_rows);
#   the continuation runs in the decision's transaction with no savepoint of its own, and its commit
#   writes the conversation, the continued step and the pause's end in one statement, which also answers
#   the Slack surface's settlement listener (approvals.settlements): is this conversation a Slack
#   thread's, whose thread must be told the verdict?
# Each request also reads the token when this process has not kept it (approvals.credential_cache).
BUDGET = {"start": 3, "say": 8, "resume": 6}


def statements(run) -> tuple[object, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        result = run()
    return result, [query["sql"] for query in captured.captured_queries]


def resume_waiting(client, conversation_id: str, verdict: str = "APPROVED"):
    return client.post(
        f"/agents/{conversation_id}/resume?wait=10", {"verdict": verdict, "note": "ok"}, format="json"
    )


def test_the_token_and_the_roles_are_read_in_one_statement(approver_client, alice_client):
    conversation_id = start(alice_client, deployed_agent())
    say(alice_client, conversation_id, "please delete my account")

    response, sql = statements(lambda: approver_client.get(f"/agents/{conversation_id}/approval-status"))

    assert response.status_code == 200  # the approver role was known: an approver may read it
    assert not [s for s in sql if s.startswith("SELECT") and 'FROM "auth_group"' in s.split("ARRAY(")[0]], sql
    assert 'FROM "authtoken_token"' in sql[0] and '"auth_group"' in sql[0]


def test_a_role_taken_away_counts_on_the_next_request(alice_client):
    """Fail closed: roles are read with the token on every request, never remembered across requests."""
    conversation_id = start(alice_client, deployed_agent())
    say(alice_client, conversation_id, "please delete my account")
    carol = make_user("carol", "approver")
    carol_client = client_for(carol)
    assert carol_client.get(f"/agents/{conversation_id}/approval-status").status_code == 200

    carol.groups.remove(Group.objects.get(name=settings.HITL_APPROVER_GROUP))

    assert carol_client.get(f"/agents/{conversation_id}/approval-status").status_code == 403
    assert resume_waiting(carol_client, conversation_id).status_code == 403


def test_an_inactive_users_token_is_refused(alice):
    client = client_for(alice)
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    response = client.post(f"/agents/{deployed_agent()}/start", format="json")
    assert response.status_code == 401
    assert (
        client_for(None)
        .post(f"/agents/{deployed_agent()}/start", format="json", HTTP_AUTHORIZATION="Token not-a-token")
        .status_code
        == 401
    )


@pytest.mark.parametrize("verdict, output", [("APPROVED", "Deletion APPROVED."), ("REJECTED", None)])
def test_the_answer_of_resume_wait_is_what_a_read_gives(alice_client, approver_client, verdict, output):
    conversation_id = start(alice_client, deployed_agent())
    said = say(alice_client, conversation_id, "please delete my account").json()
    assert said == alice_client.get(f"/agents/{conversation_id}").json()  # say answered from memory too

    answer = resume_waiting(approver_client, conversation_id, verdict).json()

    read = alice_client.get(f"/agents/{conversation_id}").json()
    decision = alice_client.get(f"/agents/{conversation_id}/approval-status").json()["lastDecision"]
    assert {k: v for k, v in answer.items() if k != "lastDecision"} == read
    assert answer["lastDecision"] == decision
    assert answer["state"] == "READY" and answer["lastDecision"]["verdict"] == verdict
    if output:
        assert answer["output"] == [output]


@pytest.mark.django_db(transaction=True)  # each request on its own, as served: no test transaction around it
def test_each_request_of_the_cycle_stays_within_its_statement_budget(alice_client, approver_client):
    agent_id = deployed_agent()
    conversation_id, start_sql = statements(lambda: start(alice_client, agent_id))
    said, say_sql = statements(lambda: say(alice_client, conversation_id, "please delete my account"))
    resumed, resume_sql = statements(lambda: resume_waiting(approver_client, conversation_id))

    assert said.json()["state"] == "AWAITING_HUMAN"
    assert resumed.json()["output"] == ["Deletion APPROVED."]
    assert len(start_sql) <= BUDGET["start"], start_sql
    assert len(say_sql) <= BUDGET["say"], say_sql
    assert len(resume_sql) <= BUDGET["resume"], resume_sql
