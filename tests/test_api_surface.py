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

from conversations.agents import create_agent, deployed_version
from conversations.demo_agent import demo_agent_document
from conversations.models import Agent, Deployment
from groups.demo_group import DEMO_GROUP_NAME, demo_member_document
from harnesses.factories import account_bot, deployed_agent, paused_conversation, start
from harnesses.users import client_for, make_user
from toolgate.outbound.secret_store import set_secret

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


def test_the_root_url_leads_to_the_api_documentation(db, anon_client):
    response = anon_client.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/api/docs/"
    assert anon_client.get(response["Location"]).status_code == 200


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
    admin, alice, bob, approver = (
        make_user("admin", "admin"),
        make_user("alice"),
        make_user("bob"),
        make_user("approver", "approver"),
    )
    agent_id = deployed_agent()
    bad_token = APIClient()
    bad_token.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    bob_client = client_for(bob)
    return World(
        admin=client_for(admin),
        alice=client_for(alice),
        bob=bob_client,
        approver=client_for(approver),
        anonymous=APIClient(),
        bad_token=bad_token,
        paused_id=paused_conversation(bob_client, agent_id),
        ready_id=start(bob_client, agent_id),
        undeployed_agent_id=str(
            create_agent(document=account_bot(name="undeployed"), created_by=None).agent_id
        ),
    )


UNKNOWN = str(uuid.uuid4())

# (who, method, path, request kwargs, status, code); {paused}, {ready}, {undeployed}, {unknown} are filled in.
ERROR_CASES = [
    ("anonymous", "get", "/agents/pending-approvals", {}, 401, "UNAUTHENTICATED"),
    ("anonymous", "post", "/agentstore/agents", {"data": {}, "format": "json"}, 401, "UNAUTHENTICATED"),
    (
        "anonymous",
        "post",
        "/agents/{paused}/resume",
        {"data": {"verdict": "APPROVED"}, "format": "json"},
        401,
        "UNAUTHENTICATED",
    ),
    ("bad_token", "get", "/agents/{paused}", {}, 401, "UNAUTHENTICATED"),
    ("alice", "get", "/agents/{paused}", {}, 403, "FORBIDDEN"),
    ("alice", "get", "/agents/{unknown}", {}, 403, "FORBIDDEN"),
    (
        "alice",
        "post",
        "/agents/{paused}/resume",
        {"data": {"verdict": "APPROVED"}, "format": "json"},
        403,
        "FORBIDDEN",
    ),
    ("alice", "post", "/agentstore/agents", {"data": account_bot(), "format": "json"}, 403, "FORBIDDEN"),
    ("admin", "get", "/agents/{unknown}", {}, 404, "NOT_FOUND"),
    (
        "approver",
        "post",
        "/agents/{unknown}/resume",
        {"data": {"verdict": "APPROVED"}, "format": "json"},
        404,
        "NOT_FOUND",
    ),
    ("admin", "get", "/agentstore/agents/{unknown}", {}, 404, "NOT_FOUND"),
    ("admin", "get", "/agentstore/agents/not-a-uuid", {}, 404, "NOT_FOUND"),
    ("anonymous", "get", "/groupstore/groups", {}, 401, "UNAUTHENTICATED"),
    ("alice", "post", "/groupstore/groups", {"data": {}, "format": "json"}, 403, "FORBIDDEN"),
    ("admin", "get", "/groupstore/groups/{unknown}", {}, 404, "NOT_FOUND"),
    ("admin", "post", "/groupstore/groups", {"data": {"name": ""}, "format": "json"}, 400, "BAD_REQUEST"),
    (
        "alice",
        "post",
        "/groups/{unknown}/conversations",
        {"data": {"question": "q"}, "format": "json"},
        404,
        "NOT_FOUND",
    ),
    ("alice", "get", "/groups/{unknown}/conversations/{unknown}", {}, 403, "FORBIDDEN"),
    ("admin", "get", "/groups/{unknown}/conversations/{unknown}", {}, 404, "NOT_FOUND"),
    (
        "alice",
        "post",
        "/groups/{unknown}/conversations/{unknown}/approve",
        {"data": {"decision": {"verdict": "APPROVED"}}, "format": "json"},
        403,
        "FORBIDDEN",
    ),
    (
        "admin",
        "post",
        "/groups/{unknown}/conversations/{unknown}/approve",
        {"data": {"decision": {}}, "format": "json"},
        400,
        "BAD_REQUEST",
    ),
    ("admin", "post", "/groups/{unknown}/conversations/{unknown}/cancel", {}, 404, "NOT_FOUND"),
    ("alice", "get", "/groups/{unknown}/conversations/{unknown}/approval-status", {}, 403, "FORBIDDEN"),
    ("approver", "get", "/groups/{unknown}/conversations/{unknown}/approval-status", {}, 404, "NOT_FOUND"),
    ("alice", "get", "/groups/{unknown}/conversations/pending-approvals", {}, 404, "NOT_FOUND"),
    ("anonymous", "get", "/groups/pending-approvals", {}, 401, "UNAUTHENTICATED"),
    ("admin", "post", "/agentstore/agents", {"data": {"name": ""}, "format": "json"}, 400, "BAD_REQUEST"),
    (
        "admin",
        "post",
        "/agentstore/agents",
        {"data": "{not json", "content_type": "application/json"},
        400,
        "BAD_REQUEST",
    ),
    (
        "admin",
        "post",
        "/agentstore/agents",
        {"data": "hello", "content_type": "text/plain"},
        415,
        "BAD_REQUEST",
    ),
    ("bob", "post", "/agents/{ready}", {"data": {}, "format": "json"}, 400, "BAD_REQUEST"),
    (
        "approver",
        "post",
        "/agents/{paused}/resume",
        {"data": {"verdict": "MAYBE"}, "format": "json"},
        400,
        "BAD_REQUEST",
    ),
    (
        "approver",
        "post",
        "/agents/{paused}/resume",
        {"data": "[]", "content_type": "application/json"},
        400,
        "BAD_REQUEST",
    ),
    ("bob", "post", "/agents/{paused}", {"data": {"input": "hello"}, "format": "json"}, 409, "WRONG_STATE"),
    ("bob", "post", "/agents/{paused}/undo", {}, 409, "WRONG_STATE"),
    (
        "approver",
        "post",
        "/agents/{ready}/resume",
        {"data": {"verdict": "APPROVED"}, "format": "json"},
        409,
        "WRONG_STATE",
    ),
    ("alice", "post", "/agents/{undeployed}/start", {}, 409, "NOT_DEPLOYED"),
    ("alice", "get", "/agents/managed/support/bob", {}, 403, "FORBIDDEN"),
    ("admin", "get", "/agents/managed/support/bob", {}, 403, "FORBIDDEN"),
    ("alice", "get", "/agents/managed/no-such-intent/alice", {}, 404, "NOT_FOUND"),
    ("alice", "get", "/AgentTriggerStore/agenttriggers", {}, 403, "FORBIDDEN"),
    ("alice", "delete", "/auth/token", {}, 405, None),
    ("alice", "get", "/agents/pending-approvals", {"HTTP_ACCEPT": "application/xml"}, 406, None),
]


@pytest.mark.parametrize(
    ("who", "method", "path", "kwargs", "status", "code"),
    ERROR_CASES,
    ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[4]}" for c in ERROR_CASES],
)
def test_every_error_is_problem_details(world, who, method, path, kwargs, status, code):
    url = path.format(
        paused=world.paused_id, ready=world.ready_id, undeployed=world.undeployed_agent_id, unknown=UNKNOWN
    )
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

    assert f"demo group {DEMO_GROUP_NAME}" in output  # its document: tests/groups/test_groups_api.py
    agent = Agent.objects.get(pk=uuid.UUID(agent_id))
    assert agent.name == "account-bot"
    assert agent.versions.get(version=1).document == demo_agent_document()  # the one copy, as stored
    assert deployed_version(agent_id=agent.pk, version=1, environment="production") is not None, output
    conversation_id = start(alice_client, agent_id)
    said = alice_client.post(
        f"/agents/{conversation_id}", {"input": "please delete my account"}, format="json"
    )
    assert said.json()["state"] == "AWAITING_HUMAN"


def test_hitl_demo_run_twice_reuses_the_same_agent(db):
    first, _ = _run_demo()
    second, output = _run_demo()

    assert second == first, output
    assert Agent.objects.filter(name="account-bot", deleted_at__isnull=True).count() == 1
    assert Deployment.objects.filter(agent_id=first, environment="production").count() == 1


# --- the documented response schema is what the endpoint returns --------------------------------------

# Operations whose success body is not JSON; only their content type is checked against the schema.
NOT_JSON = {"text/csv", "application/jsonl", "application/zip", "text/plain", "text/event-stream"}


def _openapi() -> dict[str, Any]:
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def _json_schema(schema: Any, components: dict[str, Any]) -> Any:
    """An OpenAPI 3.0 schema as JSON Schema: ``$ref`` inlined, ``nullable`` as a null alternative."""
    if isinstance(schema, list):
        return [_json_schema(item, components) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        return _json_schema(components[schema["$ref"].rsplit("/", 1)[-1]], components)
    converted = {key: _json_schema(value, components) for key, value in schema.items() if key != "nullable"}
    if "properties" in converted and "additionalProperties" not in converted:
        converted["additionalProperties"] = False  # a key the view returns must be documented
    if schema.get("nullable"):
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


def _operation_for(openapi: dict[str, Any], method: str, path: str) -> tuple[str, dict[str, Any]]:
    """The documented operation a concrete path is an instance of (``/agents/{conversation_id}``)."""
    import re

    # A literal segment beats a parameter: /agents/pending-approvals is not /agents/{conversation_id}.
    for template, operations in sorted(openapi["paths"].items(), key=lambda item: item[0].count("{")):
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, path) and method in operations:
            return f"{method.upper()} {template}", operations[method]
    raise AssertionError(f"{method.upper()} {path} is not in the schema")


def _mismatch(openapi: dict[str, Any], operation: dict[str, Any], response: Any) -> str | None:
    import jsonschema

    documented = operation["responses"].get(str(response.status_code))
    if documented is None:
        return f"status {response.status_code} is not documented"
    content = documented.get("content", {})
    media_type = response.get("Content-Type", "").split(";")[0]
    if not content:
        return None if not response.content else f"status {response.status_code} documents no body"
    if media_type not in content:
        return f"content type {media_type} is not documented ({sorted(content)})"
    if media_type in NOT_JSON:
        return None
    schema = _json_schema(content[media_type]["schema"], openapi["components"]["schemas"])
    errors = sorted(
        jsonschema.Draft7Validator(schema).iter_errors(response.json()), key=lambda e: list(e.path)
    )
    return (
        "; ".join(f"{'/'.join(map(str, e.path)) or '(top level)'}: {e.message[:160]}" for e in errors) or None
    )


def _request_mismatch(openapi: dict[str, Any], operation: dict[str, Any], body: Any) -> str | None:
    import jsonschema

    content = operation.get("requestBody", {}).get("content", {})
    if "application/json" not in content:
        return "no JSON request body is documented"
    schema = _json_schema(content["application/json"]["schema"], openapi["components"]["schemas"])
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(body))
    return (
        "; ".join(f"{'/'.join(map(str, e.path)) or '(top level)'}: {e.message[:160]}" for e in errors) or None
    )


def test_every_endpoint_returns_what_its_schema_documents(world, settings):
    """Each documented operation, called for real, answers with a body its response schema accepts; each body
    the test sends (one the view accepts) is one its request schema accepts."""
    settings.HITL_CONTINUE_AFTER_RESPONSE = False
    openapi = _openapi()
    agent_id = deployed_agent()
    admin, bob, approver = world.admin, world.bob, world.approver
    to_cancel = paused_conversation(bob, agent_id)
    to_end = paused_conversation(bob, agent_id)
    schedule = {
        "func": "approvals.maintenance_tasks.noop",
        "name": "nightly",
        "scheduleType": "MINUTES",
        "minutes": 60,
    }
    checked: set[str] = set()
    mismatches: list[str] = []

    def call(client: APIClient, method: str, path: str, expected: int, **kwargs: Any) -> Any:
        response = getattr(client, method)(path, **kwargs)
        assert response.status_code == expected, (method, path, response.status_code, response.content[:500])
        name, operation = _operation_for(openapi, method, path.split("?")[0])
        checked.add(name)
        if kwargs.get("format") == "json" and (
            problem := _request_mismatch(openapi, operation, kwargs["data"])
        ):
            mismatches.append(f"{name} request: {problem}")
        if (problem := _mismatch(openapi, operation, response)) is not None:
            mismatches.append(f"{name} -> {response.status_code}: {problem}")
        return response

    call(world.anonymous, "get", "/healthz", 200)
    call(
        world.anonymous,
        "post",
        "/auth/token",
        200,
        data={"username": "admin", "password": "pw-admin"},
        format="json",
    )
    call(admin, "get", "/metrics", 200)
    call(admin, "get", "/q/metrics", 200)
    saved = call(admin, "post", "/agentstore/agents", 201, data=account_bot(name="schema-bot"), format="json")
    new_agent = saved.json()["id"]
    call(admin, "get", "/agentstore/agents", 200)
    call(admin, "get", f"/agentstore/agents/{new_agent}", 200)
    call(
        admin,
        "put",
        f"/agentstore/agents/{new_agent}",
        200,
        data=account_bot(name="schema-bot"),
        format="json",
    )
    call(admin, "post", f"/administration/production/deploy/{new_agent}?version=2", 200)
    call(admin, "get", f"/administration/production/deploymentstatus/{new_agent}", 200)
    call(admin, "post", f"/administration/production/undeploy/{new_agent}?version=2", 200)
    archive = call(admin, "get", f"/backup/export/{new_agent}", 200).content
    call(admin, "post", "/backup/import", 201, data=archive, content_type="application/zip")
    call(admin, "delete", f"/agentstore/agents/{new_agent}", 204)

    group = {
        "name": "panel",
        "members": [{"agentId": agent_id}],
        "phases": [{"name": "p", "type": "OPINION"}],
    }
    new_group = call(admin, "post", "/groupstore/groups", 201, data=group, format="json").json()["id"]
    call(admin, "get", "/groupstore/groups", 200)
    call(
        admin, "put", f"/groupstore/groups/{new_group}", 200, data=group | {"name": "panel-2"}, format="json"
    )
    call(bob, "get", f"/groupstore/groups/{new_group}?version=1", 200)
    call(admin, "delete", f"/groupstore/groups/{new_group}", 204)

    # A discussion whose transcript and tasks show every kind of entry: the account bot pauses on the
    # question (SKIPPED, its pause cancelled), so its task FAILS and so does the one depending on it.
    scribe = deployed_agent(demo_member_document("scribe", "Noted."))
    discussed = {
        "name": "discussed",
        "members": [{"agentId": agent_id, "role": "Owner"}, {"agentId": scribe}],
        "phases": [
            {"name": "Opinions", "type": "OPINION", "repeats": 2},
            {
                "name": "Do",
                "type": "EXECUTE",
                "tasks": [
                    {"id": "close", "description": "Close it", "assignee": agent_id},
                    {"id": "log", "description": "Log it", "assignee": scribe, "dependsOn": ["close"]},
                    {"id": "note", "description": "Note it", "assignee": scribe},
                ],
            },
        ],
    }
    discussion_group = call(admin, "post", "/groupstore/groups", 201, data=discussed, format="json").json()[
        "id"
    ]
    discussion = call(
        bob,
        "post",
        f"/groups/{discussion_group}/conversations",
        201,
        data={"question": "please delete my account"},
        format="json",
    ).json()
    assert {entry["status"] for entry in discussion["transcript"]} == {"OK", "SKIPPED"}
    assert {task["status"] for task in discussion["tasks"]} == {"COMPLETED", "FAILED"}
    call(approver, "get", f"/groups/{discussion_group}/conversations/{discussion['discussionId']}", 200)

    # A gated discussion, decided; one cancelled; and the two SSE streams (their events, read from a live
    # server: tests/e2e/test_live_discussion_streams.py).
    gated = {
        "name": "gated",
        "members": [{"agentId": scribe, "role": "Scribe"}],
        "phases": [
            {"name": "Opinions", "type": "OPINION", "requiresApproval": True},
            {"name": "Wrap-up", "type": "SYNTHESIS"},
        ],
    }
    gated_group = call(admin, "post", "/groupstore/groups", 201, data=gated, format="json").json()["id"]
    question = {"question": "Ship on Friday?"}
    for_cancel, for_approve = (
        call(bob, "post", f"/groups/{gated_group}/conversations", 201, data=question, format="json").json()
        for _ in range(2)
    )
    assert for_approve["state"] == "AWAITING_APPROVAL"
    approved = call(
        approver,
        "post",
        f"/groups/{gated_group}/conversations/{for_approve['discussionId']}/approve?wait=60",
        200,
        data={"decision": {"verdict": "APPROVED", "note": "ok"}, "taskApprovals": {}},
        format="json",
    )
    assert approved.json()["state"] == "COMPLETED"
    call(bob, "post", f"/groups/{gated_group}/conversations/{for_cancel['discussionId']}/cancel", 200)
    sse = {"HTTP_ACCEPT": "text/event-stream"}
    call(bob, "post", f"/groups/{gated_group}/conversations/stream", 200, data=question, format="json", **sse)
    call(
        approver,
        "post",
        f"/groups/{gated_group}/conversations/{for_cancel['discussionId']}/approve/stream",
        200,
        data={"decision": {"verdict": "APPROVED"}},
        format="json",
        **sse,
    )
    # A discussion paused at a TASK gate (its pauseDetails name the task awaiting approval), then decided;
    # another one paused at the same gate, cancelled.
    task_gated = {
        "name": "gated",
        "members": [{"agentId": scribe}],
        "phases": [
            {
                "name": "Do",
                "type": "EXECUTE",
                "requiresApproval": True,
                "tasks": [{"id": "note", "description": "Note it", "assignee": scribe}],
            }
        ],
        "hitlConfig": {"granularity": "TASK", "timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT1H"},
    }
    task_gated_group = call(admin, "post", "/groupstore/groups", 201, data=task_gated, format="json").json()[
        "id"
    ]
    discussions = f"/groups/{task_gated_group}/conversations"
    paused, to_cancel_discussion = (
        call(bob, "post", discussions, 201, data={"question": "note it"}, format="json").json()[
            "discussionId"
        ]
        for _ in range(2)
    )
    call(approver, "get", f"{discussions}/pending-approvals", 200)
    call(approver, "get", "/groups/pending-approvals?limit=10", 200)
    call(approver, "get", f"{discussions}/{paused}/approval-status", 200)
    call(approver, "get", f"{discussions}/{paused}/approval-status?detail=full", 200)
    call(
        approver,
        "post",
        f"{discussions}/{paused}/approve?wait=60",
        200,
        data={"decision": {"verdict": "APPROVED", "note": "ok"}, "taskApprovals": {"note": "APPROVED"}},
        format="json",
    )
    call(bob, "get", f"{discussions}/{paused}/approval-status?detail=full", 200)
    call(bob, "post", f"{discussions}/{to_cancel_discussion}/cancel", 200)
    call(bob, "get", f"{discussions}?index=0&limit=5", 200)
    call(bob, "delete", f"{discussions}/{to_cancel_discussion}", 200)

    call(admin, "put", "/secretstore/secrets/payments.key", 200, data={"value": "s3cret"}, format="json")
    call(admin, "get", "/secretstore/secrets", 200)
    call(admin, "delete", "/secretstore/secrets/payments.key", 204)

    # The Slack integration store, and the two webhooks signed with slack_sdk (docs/slack.md); no Slack
    # call leaves the machine: the Web API is a closed loopback port.
    from tests.slack_surface.conftest import click_body, signed_headers

    settings.HITL_SLACK_API_URL = "http://127.0.0.1:9/"
    set_secret(name="slack.signing", value="schema-signing-secret")
    slack = {
        "agentId": agent_id,
        "signingSecret": "${vault:slack.signing}",
        "botToken": "${vault:slack.signing}",
        "hitlApprovalChannel": "C1",
        "hitlApproverUserIds": "U1",
    }
    call(admin, "post", "/integrationstore/slack", 201, data={"name": "acme", **slack}, format="json")
    call(admin, "get", "/integrationstore/slack", 200)
    call(admin, "get", "/integrationstore/slack/acme", 200)
    call(admin, "put", "/integrationstore/slack/acme", 200, data=slack, format="json")
    challenge = '{"type": "url_verification", "challenge": "c"}'
    call(
        world.anonymous,
        "post",
        "/integrations/slack/events",
        200,
        data=challenge,
        content_type="application/json",
        **signed_headers(challenge, secret="schema-signing-secret"),
    )
    click = click_body(f"acme|{world.paused_id}", user="UNOTALLOWED")
    call(
        world.anonymous,
        "post",
        "/integrations/slack/interactive",
        200,
        data=click,
        content_type="application/x-www-form-urlencoded",
        **signed_headers(click, secret="schema-signing-secret"),
    )
    call(admin, "delete", "/integrationstore/slack/acme", 204)

    conversation = call(
        bob,
        "post",
        f"/agents/{agent_id}/start?environment=production",
        201,
        data={"context": {"channel": "web"}},
        format="json",
    ).json()["conversationId"]
    call(bob, "post", f"/agents/{conversation}", 200, data={"input": "hello"}, format="json")
    call(bob, "get", f"/agents/{conversation}", 200)
    call(bob, "post", f"/agents/{conversation}/undo", 200)
    call(bob, "post", f"/agents/{conversation}/redo", 200)
    # Managed conversations: an agent trigger, bob's conversation for its intent (started by the read),
    # undone, redone and ended, then the trigger deleted
    trigger = {
        "intent": "support",
        "agentDeployments": [
            {
                "environment": "production",
                "agentId": agent_id,
                "initialContext": {"channel": {"type": "string", "value": "web"}},
            }
        ],
    }
    call(admin, "post", "/AgentTriggerStore/agenttriggers", 201, data=trigger, format="json")
    call(admin, "get", "/AgentTriggerStore/agenttriggers", 200)
    call(admin, "get", "/AgentTriggerStore/agenttriggers/support", 200)
    call(admin, "put", "/AgentTriggerStore/agenttriggers/support", 200, data=trigger, format="json")
    managed = "/agents/managed/support/bob"
    call(bob, "get", managed, 200)
    call(bob, "post", managed, 200, data={"input": "hello", "context": {"channel": "web"}}, format="json")
    call(bob, "get", f"{managed}/undo", 200)
    call(bob, "post", f"{managed}/undo", 200)
    call(bob, "get", f"{managed}/redo", 200)
    call(bob, "post", f"{managed}/redo", 200)
    call(bob, "post", f"{managed}/endConversation", 200)
    call(admin, "delete", "/AgentTriggerStore/agenttriggers/support", 200)
    call(approver, "get", "/agents/pending-approvals", 200)
    call(approver, "get", f"/agents/{world.paused_id}/approval-status", 200)
    call(bob, "get", f"/agents/{world.paused_id}/approval-status?detail=full", 200)
    call(bob, "get", f"/agents/{world.ready_id}/approval-status", 200)
    call(
        approver,
        "post",
        f"/agents/{world.paused_id}/resume",
        200,
        data={"verdict": "APPROVED", "note": "ok"},
        format="json",
    )
    call(approver, "get", f"/agents/{world.paused_id}/approval-status", 200)
    call(
        approver,
        "post",
        f"/agents/{to_cancel}/resume?wait=5",
        200,
        data={"verdict": "REJECTED"},
        format="json",
    )
    call(bob, "post", f"/agents/{to_end}/cancel", 200)
    call(bob, "post", f"/agents/{to_end}/endConversation", 200)

    call(
        admin,
        "post",
        "/administration/operator/canary-result",
        204,
        data={"outcome": "pass", "durationSeconds": 1.5},
        format="json",
    )
    call(admin, "post", "/administration/operator/gate-status", 204, data={"verified": True}, format="json")
    call(admin, "get", "/audit/entries", 200)
    call(admin, "get", "/audit/export?format=jsonl", 200)

    created = call(admin, "post", "/schedulestore/schedules", 201, data=schedule, format="json").json()
    call(admin, "get", "/schedulestore/schedules", 200)
    call(admin, "get", f"/schedulestore/schedules/{created['id']}", 200)
    call(admin, "put", f"/schedulestore/schedules/{created['id']}", 200, data={"minutes": 30}, format="json")
    call(admin, "post", f"/schedulestore/schedules/{created['id']}/disable", 200)
    call(admin, "post", f"/schedulestore/schedules/{created['id']}/enable", 200, data={}, format="json")
    call(admin, "post", f"/schedulestore/schedules/{created['id']}/fire", 202)
    call(admin, "delete", f"/schedulestore/schedules/{created['id']}", 204)

    # Approval requests: one filed by a service account for bob with a pinned request (filed again: the
    # same request), approved with an edit, claimed with the edited request and reported; one rejected;
    # one withdrawn by bob; the lists, the webhook signing secret and the grant keys.
    service = client_for(make_user("refund-bot", "agent"))
    pinned = {
        "method": "POST",
        "url": "https://payments.example/refunds",
        "headers": {"Content-Type": "application/json", "Authorization": "Bearer sk-live-abcdef123456"},
        "body": '{"orderId":"A-1","amount":250}',
        "secretHeaders": ["Authorization"],
    }
    filing = {
        "idempotencyKey": "run-1/call-1",
        "agent": "refund-bot",
        "action": {"name": "refund", "arguments": {"orderId": "A-1", "amount": 250}},
        "reason": "Refund over 100 EUR",
        "request": pinned,
        "onBehalfOf": "bob",
        "context": {"messages": ["refund order A-1"]},
        "hitlConfig": {"approvalTimeout": "PT1H", "timeoutPolicy": "AUTO_REJECT"},
        "callbackUrl": "https://agents.example/hooks",
    }
    filed = call(service, "post", "/approval-requests", 201, data=filing, format="json").json()
    assert (
        call(service, "post", "/approval-requests", 200, data=filing, format="json").json()["id"]
        == filed["id"]
    )
    request_path = f"/approval-requests/{filed['id']}"
    call(bob, "get", request_path, 200)
    call(approver, "get", f"{request_path}?wait=0", 200)
    edited_body = '{"orderId":"A-1","amount":100}'
    call(
        approver,
        "post",
        f"{request_path}/decision",
        200,
        data={
            "verdict": "APPROVED",
            "note": "at most 100",
            "amendedArguments": {"orderId": "A-1", "amount": 100},
            "amendedRequest": {"body": edited_body},
        },
        format="json",
    )
    call(
        service,
        "post",
        f"{request_path}/claim",
        200,
        data={"request": {**pinned, "body": edited_body}},
        format="json",
    )
    call(
        service,
        "post",
        f"{request_path}/outcome",
        200,
        data={"status": "succeeded", "httpStatus": 201, "summary": "refunded 100"},
        format="json",
    )
    call(service, "get", request_path, 200)
    unpinned = {key: filing[key] for key in ("agent", "action", "reason")}
    rejected, withdrawn = (
        call(
            service,
            "post",
            "/approval-requests",
            201,
            data={**unpinned, "idempotencyKey": key},
            format="json",
        ).json()["id"]
        for key in ("run-1/call-2", "run-1/call-3")
    )
    call(
        approver,
        "post",
        f"/approval-requests/{rejected}/decision",
        200,
        data={"verdict": "REJECTED", "note": "not this one"},
        format="json",
    )
    call(service, "post", f"/approval-requests/{withdrawn}/cancel", 200)
    call(service, "get", f"/approval-requests/{withdrawn}/events", 200, HTTP_ACCEPT="text/event-stream")
    call(service, "get", "/approval-requests?status=APPROVED&limit=10", 200)
    call(bob, "get", "/approval-requests", 200)
    call(approver, "get", "/approval-requests", 200)
    call(service, "post", "/approval-requests/webhook-secret", 201)
    call(world.anonymous, "get", "/.well-known/hitl-grant-keys", 200)

    documented = {
        f"{method.upper()} {path}" for path, operations in openapi["paths"].items() for method in operations
    }
    assert documented - checked == set(), "documented operations this test does not call"
    assert mismatches == [], "\n".join(mismatches)
