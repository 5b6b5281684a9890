"""The API's outer surface: token login, problem details for every error, health, and the demo command."""

from __future__ import annotations

import io
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.cache import cache
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from conversations.agents import create_agent, is_deployed
from conversations.demo_agent import demo_agent_document
from conversations.models import Agent, Deployment
from tests.conftest import client_for, make_user
from tests.factories import account_bot, deployed_agent, paused_conversation, start

PROBLEM = "application/problem+json"
PROBLEM_FIELDS = {"type", "title", "status", "detail", "code"}


@pytest.fixture(autouse=True)
def _fresh_login_throttle():
    cache.clear()  # the login throttle counts in the cache, across tests of the session
    yield
    cache.clear()


def assert_problem(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.content)
    assert response["Content-Type"].startswith(PROBLEM), response["Content-Type"]
    body = response.json()
    assert PROBLEM_FIELDS <= set(body), body
    assert body["status"] == status
    assert isinstance(body["detail"], str) and body["detail"]
    assert isinstance(body["title"], str) and body["title"]
    if code is not None:
        assert body["code"] == code, body
    return body


def test_token_login_returns_the_users_api_token(db, anon_client, alice):
    response = anon_client.post("/auth/token", {"username": "alice", "password": "pw-alice"}, format="json")

    assert response.status_code == 200, response.content
    assert response.json() == {"token": Token.objects.get(user=alice).key}


def test_token_login_with_a_wrong_password_is_unauthenticated(db, anon_client, alice):
    response = anon_client.post("/auth/token", {"username": "alice", "password": "nope"}, format="json")

    assert_problem(response, 401, "UNAUTHENTICATED")
    assert "token" not in response.json()


def test_token_login_for_an_unknown_user_is_unauthenticated(db, anon_client):
    response = anon_client.post("/auth/token", {"username": "nobody", "password": "pw"}, format="json")

    assert_problem(response, 401, "UNAUTHENTICATED")


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        ({}, {"username", "password"}),
        ({"username": "alice"}, {"password"}),
        ({"password": "pw-alice"}, {"username"}),
        ({"username": "", "password": 5}, {"username", "password"}),
    ],
)
def test_token_login_names_each_missing_field(db, anon_client, alice, body, missing):
    response = anon_client.post("/auth/token", body, format="json")

    problem = assert_problem(response, 400, "BAD_REQUEST")
    assert {e["field"] for e in problem["errors"]} == missing


def test_anonymous_inbox_is_401_with_a_www_authenticate_challenge(db, anon_client):
    response = anon_client.get("/agents/pending-approvals")

    assert_problem(response, 401, "UNAUTHENTICATED")
    assert response["WWW-Authenticate"].startswith("Token")


def test_an_unknown_url_is_404(db, anon_client, alice_client):
    assert anon_client.get("/no/such/endpoint").status_code == 404
    assert alice_client.get("/agents/x/y/z").status_code == 404


def test_healthz_answers_anonymous_callers(db, anon_client):
    response = anon_client.get("/healthz")

    assert response.status_code == 200
    assert response.json()["status"] == "ok"


@dataclass
class World:
    admin: APIClient
    alice: APIClient
    bob: APIClient
    approver: APIClient
    anonymous: APIClient
    bad_token: APIClient
    paused_id: str
    ready_id: str
    undeployed_agent_id: str


@pytest.fixture
def world(db) -> World:
    admin, alice, bob, approver = (make_user("admin", "admin"), make_user("alice"), make_user("bob"),
                                   make_user("approver", "approver"))
    agent_id = deployed_agent()
    bad_token = APIClient()
    bad_token.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    bob_client = client_for(bob)
    return World(
        admin=client_for(admin), alice=client_for(alice), bob=bob_client, approver=client_for(approver),
        anonymous=APIClient(), bad_token=bad_token,
        paused_id=paused_conversation(bob_client, agent_id),
        ready_id=start(bob_client, agent_id),
        undeployed_agent_id=str(create_agent(document=account_bot(name="undeployed"), created_by=None).agent_id),
    )


UNKNOWN = str(uuid.uuid4())

# (who, method, path, request kwargs, status, code); {paused}, {ready}, {undeployed}, {unknown} are filled in.
ERROR_CASES = [
    ("anonymous", "get", "/agents/pending-approvals", {}, 401, "UNAUTHENTICATED"),
    ("anonymous", "post", "/agentstore/agents", {"data": {}, "format": "json"}, 401, "UNAUTHENTICATED"),
    ("anonymous", "post", "/agents/{paused}/resume", {"data": {"verdict": "APPROVED"}, "format": "json"},
     401, "UNAUTHENTICATED"),
    ("bad_token", "get", "/agents/{paused}", {}, 401, "UNAUTHENTICATED"),
    ("alice", "get", "/agents/{paused}", {}, 403, "FORBIDDEN"),
    ("alice", "get", "/agents/{unknown}", {}, 403, "FORBIDDEN"),
    ("alice", "post", "/agents/{paused}/resume", {"data": {"verdict": "APPROVED"}, "format": "json"},
     403, "FORBIDDEN"),
    ("alice", "post", "/agentstore/agents", {"data": account_bot(), "format": "json"}, 403, "FORBIDDEN"),
    ("admin", "get", "/agents/{unknown}", {}, 404, "NOT_FOUND"),
    ("approver", "post", "/agents/{unknown}/resume", {"data": {"verdict": "APPROVED"}, "format": "json"},
     404, "NOT_FOUND"),
    ("admin", "get", "/agentstore/agents/{unknown}", {}, 404, "NOT_FOUND"),
    ("admin", "get", "/agentstore/agents/not-a-uuid", {}, 404, "NOT_FOUND"),
    ("admin", "post", "/agentstore/agents", {"data": {"name": ""}, "format": "json"}, 400, "BAD_REQUEST"),
    ("admin", "post", "/agentstore/agents", {"data": "{not json", "content_type": "application/json"},
     400, "BAD_REQUEST"),
    ("admin", "post", "/agentstore/agents", {"data": "hello", "content_type": "text/plain"}, 415, "BAD_REQUEST"),
    ("bob", "post", "/agents/{ready}", {"data": {}, "format": "json"}, 400, "BAD_REQUEST"),
    ("approver", "post", "/agents/{paused}/resume", {"data": {"verdict": "MAYBE"}, "format": "json"},
     400, "BAD_REQUEST"),
    ("approver", "post", "/agents/{paused}/resume", {"data": "[]", "content_type": "application/json"},
     400, "BAD_REQUEST"),
    ("bob", "post", "/agents/{paused}", {"data": {"input": "hello"}, "format": "json"}, 409, "WRONG_STATE"),
    ("bob", "post", "/agents/{paused}/undo", {}, 409, "WRONG_STATE"),
    ("approver", "post", "/agents/{ready}/resume", {"data": {"verdict": "APPROVED"}, "format": "json"},
     409, "WRONG_STATE"),
    ("alice", "post", "/agents/{undeployed}/start", {}, 409, "NOT_DEPLOYED"),
    ("alice", "delete", "/auth/token", {}, 405, None),
    ("alice", "get", "/agents/pending-approvals", {"HTTP_ACCEPT": "application/xml"}, 406, None),
]


@pytest.mark.parametrize(
    ("who", "method", "path", "kwargs", "status", "code"),
    ERROR_CASES,
    ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[4]}" for c in ERROR_CASES],
)
def test_every_error_is_problem_details(world, who, method, path, kwargs, status, code):
    url = path.format(paused=world.paused_id, ready=world.ready_id, undeployed=world.undeployed_agent_id,
                      unknown=UNKNOWN)
    response = getattr(getattr(world, who), method)(url, **kwargs)

    body = assert_problem(response, status, code)
    if code == "WRONG_STATE":
        state = body["currentState"]
        in_words = state.lower().replace("_", " ")  # "awaiting human approval" names AWAITING_HUMAN
        assert state in body["detail"] or in_words in body["detail"].lower(), body
    if status == 400 and "errors" in body:
        assert all(e["field"] for e in body["errors"]), body["errors"]


def test_a_state_conflict_names_the_current_state(world):
    body = world.bob.post(f"/agents/{world.paused_id}", {"input": "hello"}, format="json").json()

    assert body["code"] == "WRONG_STATE"
    assert body["currentState"] == "AWAITING_HUMAN"
    assert f"POST /agents/{world.paused_id}/resume" in body["detail"]


def _run_demo() -> tuple[str, str]:
    out = io.StringIO()
    call_command("hitl_demo", stdout=out)
    lines = out.getvalue().strip().splitlines()
    return lines[-1].strip(), out.getvalue()


def test_hitl_demo_creates_a_deployed_agent_and_prints_its_id_last(db, alice_client):
    agent_id, output = _run_demo()

    agent = Agent.objects.get(pk=uuid.UUID(agent_id))
    assert agent.name == "account-bot"
    assert agent.versions.get(version=1).document == demo_agent_document()  # the one copy, as stored
    assert is_deployed(agent_id=agent.pk, version=1, environment="production"), output
    conversation_id = start(alice_client, agent_id)
    said = alice_client.post(f"/agents/{conversation_id}", {"input": "please delete my account"}, format="json")
    assert said.json()["state"] == "AWAITING_HUMAN"


def test_hitl_demo_run_twice_reuses_the_same_agent(db):
    first, _ = _run_demo()
    second, output = _run_demo()

    assert second == first, output
    assert Agent.objects.filter(name="account-bot", deleted_at__isnull=True).count() == 1
    assert Deployment.objects.filter(agent_id=first, environment="production").count() == 1
