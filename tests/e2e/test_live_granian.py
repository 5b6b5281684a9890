"""The REST API under granian's WSGI interface, the server docs/operations.md recommends for it alone: a
live granian process on the test database, driven with httpx.

granian starts each request's environ from the process's environment; the server here runs with
``HTTP_AUTHORIZATION`` naming a token in its environment (the one the last test gives alice), so a
request without the header would be hers if that variable reached Django
(``hitl_project.wsgi.ProcessEnvironmentFree``).
"""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token

from conversations.models import Conversation, ConversationState
from harnesses.factories import deployed_agent
from harnesses.live_stack import api_user, eventually, running_stack

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]


CANARY = "granian-process-environment-canary"  # a token key, and the server's HTTP_AUTHORIZATION


@pytest.fixture
def granian(django_db_blocker, tmp_path):
    """granian serving ``hitl_project.wsgi``, no q-cluster: a continuation it does not run itself never
    runs. ``HTTP_AUTHORIZATION`` in its environment names the token ``CANARY``."""
    stack = running_stack(
        django_db_blocker, tmp_path, qclusters=False, server="granian", HTTP_AUTHORIZATION=f"Token {CANARY}"
    )
    yield next(stack)
    stack.close()


def paused(client, agent_id: str) -> str:
    started = client.post(f"/agents/{agent_id}/start")
    assert started.status_code == 201, started.text
    conversation_id = started.json()["conversationId"]
    said = client.post(f"/agents/{conversation_id}", json={"input": "please delete my account"})
    assert said.status_code == 200, said.text
    assert said.json()["state"] == "AWAITING_HUMAN"
    return conversation_id


def test_an_approval_cycle_runs_under_granian(granian):
    alice, approver, agent_id = api_user("alice"), api_user("approver", "approver"), deployed_agent()
    with granian.client(alice) as as_alice, granian.client(approver) as as_approver:
        conversation_id = paused(as_alice, agent_id)

        decided = as_approver.post(
            f"/agents/{conversation_id}/resume", params={"wait": 10}, json={"verdict": "APPROVED"}
        )

        assert decided.status_code == 200, decided.text
        assert decided.json()["state"] == "READY"
        assert decided.json()["output"] == ["Deletion APPROVED."]
        again = as_approver.post(f"/agents/{conversation_id}/resume", json={"verdict": "APPROVED"})
        assert again.status_code == 409


def test_a_decision_without_wait_continues_once_granian_has_its_answer(granian):
    """The continuation runs in the response's ``close()``, which granian calls once the body is out."""
    alice, approver, agent_id = api_user("alice"), api_user("approver", "approver"), deployed_agent()
    with granian.client(alice) as as_alice, granian.client(approver) as as_approver:
        conversation_id = paused(as_alice, agent_id)

        decided = as_approver.post(f"/agents/{conversation_id}/resume", json={"verdict": "APPROVED"})

        assert decided.status_code == 200, decided.text
        assert decided.json()["verdict"] == "APPROVED"
        eventually(
            lambda: Conversation.objects.get(id=conversation_id).state == ConversationState.READY,
            timeout=30,
            what="the continuation run by the web process after its answer",
        )
        assert as_alice.get(f"/agents/{conversation_id}").json()["output"] == ["Deletion APPROVED."]


def test_a_variable_of_the_server_process_never_passes_for_a_request_header(granian):
    Token.objects.filter(key=api_user("alice")).update(key=CANARY)
    agent_id = deployed_agent()
    with granian.client() as anonymous, granian.client() as as_alice:
        as_alice.headers["Authorization"] = f"Bearer {CANARY}"  # her own header: not the variable's value
        assert as_alice.post(f"/agents/{agent_id}/start").status_code == 201

        refused = anonymous.post(f"/agents/{agent_id}/start")

        assert refused.status_code == 401, refused.text
        assert Conversation.objects.count() == 1
