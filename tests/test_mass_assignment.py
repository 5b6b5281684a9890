"""S2, mass assignment and spoofing: every writable JSON body the OpenAPI schema documents refuses a field
its contract does not have (400 naming it, nothing changed), and no body field can name the actor.

The list of bodies and their allowed fields comes from the schema (drf-spectacular, as /api/schema/
serves it), so a new writable endpoint is covered without touching this file; a valid body for each is
the matrix's own call (harnesses/authz_rest.py). The actor fields a client could try (``decidedBy``,
``owner``…) are refused like any unknown field, or, where the contract takes them for clients of the
original (``decidedBy`` on a decision), ignored: the stored decider, owner and audit actor are the caller.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from approvals.models import AuditEntry, Pause
from conversations.models import Conversation
from harnesses.authz_rest import REST_ENDPOINTS, World, call_kwargs
from tests.test_api_surface import _openapi

EXTRA = "hitlNotInTheContract"
SPOOFS = ("decidedBy", "owner", "ownerId", "actor", "createdBy", "userId")
# Bodies whose shape is someone else's, each for its reason; every other JSON body is checked.
EXEMPT = {
    "POST /auth/token": "credentials, not a write: clients of the original send more, and nothing is stored",
    "POST /integrations/slack/events": "Slack's own event payload, authenticated by its signature",
}
# An SSE endpoint that refuses a bad body inside its stream: the same body as its twin, checked there.
STREAM_TWINS = {
    "POST /groups/{group_id}/conversations/{discussion_id}/approve/stream": (
        "POST /groups/{group_id}/conversations/{discussion_id}/approve"
    ),
}
# Where the contract takes an actor field and ignores it (docs/rest-api.md, resume): the caller decides.
IGNORED = {
    ("POST /agents/{conversation_id}/resume", "decidedBy"),
    ("POST /approval-requests/{request_id}/decision", "decidedBy"),
    ("decision", "decidedBy"),
}
# Who sends each body: someone the matrix allows (the owner for a conversation, the service account that
# files, claims and reports on an approval request, an approver for a decision, else the admin).
SENDER = {
    "POST /agents/{conversation_id}": "owner",
    "POST /agents/{agent_id}/start": "owner",
    "POST /approval-requests": "agent",
    "POST /approval-requests/{request_id}/claim": "agent",
    "POST /approval-requests/{request_id}/outcome": "agent",
    "POST /approval-requests/{request_id}/decision": "approver",
}


def _resolved(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def writable_bodies() -> dict[str, dict[str, Any]]:
    """Every documented JSON request body: operation -> {"fields", "nested": {field: its fields}}."""
    openapi = _openapi()
    components = openapi["components"]["schemas"]
    bodies = {}
    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            name = f"{method.upper()} {path}"
            if "application/json" not in content or name in EXEMPT or name in STREAM_TWINS:
                continue
            schema = _resolved(content["application/json"]["schema"], components)
            properties = schema.get("properties", {})
            nested = {
                field: set(_resolved(sub, components).get("properties", {}))
                for field, sub in properties.items()
                if _resolved(sub, components).get("properties")
            }
            bodies[name] = {"fields": set(properties), "nested": nested}
    return bodies


BODIES = writable_bodies()


def test_the_schema_documents_the_writable_bodies_we_know_of():
    """The list is generated; this only guards against the generator finding nothing."""
    assert {"POST /agents/{conversation_id}/resume", "PUT /secretstore/secrets/{name}"} <= set(BODIES)
    assert len(BODIES) >= 15, sorted(BODIES)


def _send(world: World, name: str, mutate: Any) -> tuple[Any, Any]:
    endpoint = REST_ENDPOINTS[name]
    role = SENDER.get(name) or ("approver" if endpoint.rule in ("decider",) else "admin")
    role = "staff" if endpoint.rule == "staff" else role
    state = endpoint.states[0]
    subject = world.subject(endpoint.subject, state, fresh=True) if endpoint.subject else None
    path = endpoint.path.replace("{a}", world.agent_id).replace("{g}", world.gated_group)
    path = path.replace("{s}", str(subject)) if endpoint.subject else path
    kwargs = call_kwargs(endpoint, world, subject)
    assert kwargs.get("format") == "json", f"{name}: the matrix sends no JSON body"
    kwargs["data"] = mutate(copy.deepcopy(kwargs["data"]))
    response = getattr(world.clients[role], name.split()[0].lower())(path, **kwargs)
    return response, subject


def _with(field: str, nested: str | None = None) -> Any:
    """``field`` added at the top of the body, or to its ``nested`` object (made when a valid body may
    leave it out, e.g. a decision's ``amendedRequest``)."""

    def mutate(body: dict[str, Any]) -> dict[str, Any]:
        target = body.setdefault(nested, {}) if nested else body
        target[field] = "alice"
        return body

    return mutate


def _refused_naming(response: Any, field: str) -> bool:
    if response.status_code != 400:
        return False
    return any(e.get("field") == field for e in response.json().get("errors", []))


@pytest.fixture
def world(db, settings):
    settings.HITL_CONTINUE_AFTER_RESPONSE = False
    return World.build()


@pytest.mark.parametrize("name", sorted(BODIES))
def test_every_writable_body_refuses_a_field_not_in_its_contract_and_any_actor_field(world, name):
    """One operation's cells: an unknown field at the top and in each nested object its schema documents
    is a 400 naming it; each actor field is refused the same way, or ignored where the contract says so
    (the stored decider and the audit actor are then the caller)."""
    wrong = []
    response, _subject = _send(world, name, _with(EXTRA))
    if not (_refused_naming(response, EXTRA) and EXTRA in response.json()["detail"]):
        wrong.append(f"{EXTRA}: {response.status_code} {response.content[:300]!r}")
    for nested in sorted(BODIES[name]["nested"]):
        response, _subject = _send(world, name, _with(EXTRA, nested))
        if not _refused_naming(response, f"{nested}.{EXTRA}"):
            wrong.append(f"{nested}.{EXTRA}: {response.status_code} {response.content[:300]!r}")
    for field in (f for f in SPOOFS if f not in BODIES[name]["fields"]):
        response, subject = _send(world, name, _with(field))
        if (name, field) in IGNORED:
            if response.status_code != 200:
                wrong.append(f"{field} (ignored): {response.status_code} {response.content[:300]!r}")
            else:
                _assert_the_caller_decided(subject, "approver")
        elif not _refused_naming(response, field):
            wrong.append(f"{field}: {response.status_code} {response.content[:300]!r}")
    assert wrong == [], f"{name}:\n" + "\n".join(wrong)


def test_a_streamed_body_is_the_same_contract_as_its_twin():
    """An SSE twin refuses inside its stream (a group_error event, docs/rest-api.md); its body is its
    twin's serializer, so the twin's cells above are its cells."""
    openapi = _openapi()
    for streamed, twin in STREAM_TWINS.items():
        method, path = streamed.split()
        twin_path = twin.split()[1]
        body = openapi["paths"][path][method.lower()]["requestBody"]["content"]["application/json"]["schema"]
        twin_body = openapi["paths"][twin_path][method.lower()]["requestBody"]["content"]["application/json"]
        assert body == twin_body["schema"], streamed


def test_decided_by_in_a_decision_is_ignored_the_decider_is_the_caller(world):
    response, conversation_id = _send(world, "POST /agents/{conversation_id}/resume", _with("decidedBy"))

    assert response.status_code == 200, response.content
    assert response.json()["decidedBy"] == "approver"
    _assert_the_caller_decided(conversation_id, "approver")
    assert Conversation.objects.get(pk=conversation_id).owner.username == "bob"


def test_decided_by_in_a_group_decision_is_ignored_the_decider_is_the_caller(world):
    response, discussion_id = _send(
        world, "POST /groups/{group_id}/conversations/{discussion_id}/approve", _with("decidedBy", "decision")
    )

    assert response.status_code in (200, 202), response.content
    _assert_the_caller_decided(discussion_id, "approver")


def _assert_the_caller_decided(subject_id: Any, username: str) -> None:
    pause = Pause.objects.get(subject_id=subject_id)
    assert pause.decided_by == username
    assert pause.decided_by_user.username == username
    actors = set(
        AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval").values_list("actor", flat=True)
    )
    assert actors == {username}


def test_every_mcp_tool_refuses_an_argument_it_does_not_declare():
    """The MCP tools' arguments are bodies too: an unknown one (an actor field included) is refused
    naming it, before the tool runs; the advertised schema says additionalProperties false."""
    import pydantic

    from mcp_surface.server import build_server

    tools = build_server()._tool_manager.list_tools()
    assert len(tools) >= 11
    for tool in tools:
        assert tool.parameters.get("additionalProperties") is False, tool.name
        for extra in (EXTRA, *SPOOFS):
            with pytest.raises(pydantic.ValidationError, match=extra):
                tool.fn_metadata.arg_model.model_validate({extra: "alice"})
