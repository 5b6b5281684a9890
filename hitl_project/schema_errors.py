"""The error half of the OpenAPI contract, added to every operation by one drf-spectacular hook.

Views declare what they answer when all goes well; the errors come from one exception handler
(common/problems.py) as RFC 9457 problem details, so they are declared here by one rule each
(docs/rest-api.md "Errors"), not view by view:

- 401 for every operation that needs a token (every one but the public ones and Slack's, which
  declare their own signature refusals);
- 403 where the caller's role or access to the subject is checked (any permission beyond "signed in",
  a conversation or discussion in the path: no existence oracle), and on every unsafe method (the
  session's CSRF check refuses a session caller without the token);
- 404 for every operation with a path parameter;
- 400 for every operation that reads a body or a query parameter; 413 and 415 for every body;
- 409 where a state or a conflict is checked (``STATE_CHECKED``), and where a turn may be refused by the
  open-pause caps (every unsafe method of a view counted against the ``turns`` rate: ``LIMIT_REACHED``);
- 429 on every unsafe method of a view with a per-user throttle (``THROTTLED``, common/throttles.py),
  and for the login throttle;
- 503 for every operation: the database unreachable or its answer lost (``UNAVAILABLE``, with
  ``Retry-After``; docs/rest-api.md).

Every request body that refuses a field its contract does not have (all but the login's and Slack's
payloads, docs/rest-api.md) says so with ``additionalProperties: false``, at the top and in nested
objects that list their fields. The schema is checked against the running service by
tests/test_api_contract.py (schemathesis, every check, every role).
"""

from __future__ import annotations

from typing import Any

from common.throttles import THROTTLES, TURNS

PROBLEM = "Problem"
PROBLEM_CONTENT_TYPE = "application/problem+json"
PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "RFC 9457 problem details (docs/rest-api.md, Errors).",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "code": {
            "type": "string",
            "enum": [
                "BAD_REQUEST",
                "UNAUTHENTICATED",
                "FORBIDDEN",
                "NOT_FOUND",
                "WRONG_STATE",
                "CONFLICT",
                "NOT_DEPLOYED",
                "DISABLED",
                "LIMIT_REACHED",
                "THROTTLED",
                "UNAVAILABLE",
                "INTERNAL",
                "IDEMPOTENCY_CONFLICT",
                "ALREADY_CLAIMED",
                "OUTCOME_UNKNOWN",
                "REQUEST_CHANGED",
                "GRANT_EXPIRED",
            ],
        },
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
                "required": ["field", "message"],
            },
        },
    },
    "required": ["type", "title", "status", "detail", "code"],
}

DESCRIPTIONS = {
    400: "Bad request: problem details, every bad field in `errors`.",
    401: "Not authenticated.",
    403: "Forbidden: the role or the subject's access does not allow it (same answer for an unknown id).",
    404: "No such resource (admins and approvers; a plain user gets 403 for a conversation).",
    409: "The subject is in the wrong state, or a conflict (`WRONG_STATE`, `CONFLICT`, `NOT_DEPLOYED`, "
    "`DISABLED`), or an open-pause cap is reached (`LIMIT_REACHED`: nothing was started or said).",
    413: "The body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE.",
    415: "The body's media type is not one this operation reads.",
    429: "Too many requests (`THROTTLED`, `Retry-After`): over the caller's request rate, nothing was done.",
    503: "The database did not answer (`UNAVAILABLE`, `Retry-After`): read the state again, then retry.",
}

# operations that check a subject's state or a conflict (docs/rest-api.md), "METHOD /path"
STATE_CHECKED = frozenset(
    {
        "POST /agents/{agent_id}/start",
        "POST /agents/{conversation_id}",
        "POST /agents/{conversation_id}/resume",
        "POST /agents/{conversation_id}/cancel",
        "POST /agents/{conversation_id}/undo",
        "POST /agents/{conversation_id}/redo",
        "POST /agents/{conversation_id}/endConversation",
        "POST /administration/{environment}/deploy/{agent_id}",
        "POST /administration/{environment}/undeploy/{agent_id}",
        "POST /agentstore/agents",
        "POST /backup/import",
        "POST /groupstore/groups",
        "POST /groups/{group_id}/conversations",
        "POST /groups/{group_id}/conversations/{discussion_id}/approve",
        "POST /groups/{group_id}/conversations/{discussion_id}/cancel",
        "DELETE /groups/{group_id}/conversations/{discussion_id}",
        "POST /integrationstore/slack",
        "POST /schedulestore/schedules/{schedule_id}/fire",
        # managed conversations: a start refused (NOT_DEPLOYED, LIMIT_REACHED), a paused or running one,
        # an intent that already has a trigger
        "GET /agents/managed/{intent}/{user_id}",
        "POST /agents/managed/{intent}/{user_id}/undo",
        "POST /agents/managed/{intent}/{user_id}/redo",
        "POST /agents/managed/{intent}/{user_id}/endConversation",
        "POST /AgentTriggerStore/agenttriggers",
    }
)
EXTRA = {
    "POST /auth/token": (400, 401, 429),
    "DELETE /secretstore/secrets/{name}": (400,),  # a name outside the secret store's pattern
    "GET /agents/managed/{intent}/{user_id}": (429,),  # a read that starts a conversation counts as a turn
}
# bodies that take more than their fields (docs/rest-api.md): the login's, and Slack's own payloads
LENIENT_BODIES = frozenset({"Credentials", "SlackEventBody", "SlackInteractionBody"})
SUBJECT_PARAMETERS = ("{conversation_id}", "{discussion_id}")
UNSAFE = frozenset({"post", "put", "patch", "delete"})
METHODS = frozenset({"get", "post", "put", "patch", "delete"})
NONE: frozenset[str] = frozenset()


def error_statuses(
    path: str, method: str, operation: dict[str, Any], *, role_checked: bool, throttled: frozenset[str] = NONE
) -> set[int]:
    """The error statuses ``method path`` can answer with, by the rules of the module docstring
    (``throttled``: the per-user throttle scopes its view counts unsafe requests against)."""
    key = f"{method.upper()} {path}"
    statuses = set(EXTRA.get(key, ())) | {503}
    security = operation.get("security")
    if not security or {} in security:
        return statuses  # public, or authenticated by something else (Slack's signature)
    parameters = operation.get("parameters", [])
    statuses.add(401)
    if method in UNSAFE or any(name in path for name in SUBJECT_PARAMETERS) or role_checked:
        statuses.add(403)
    if "{" in path:
        statuses.add(404)
    if "requestBody" in operation:
        statuses.update((400, 413, 415))
    if any(parameter["in"] == "query" for parameter in parameters):
        statuses.add(400)
    if key in STATE_CHECKED:
        statuses.add(409)
    if method in UNSAFE and throttled:
        statuses.add(429)
        if TURNS in throttled:
            statuses.add(409)
    return statuses


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the problem schema, each operation's error responses, and
    ``additionalProperties: false`` on the bodies that refuse unknown fields."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas[PROBLEM] = PROBLEM_SCHEMA
    problem = {PROBLEM_CONTENT_TYPE: {"schema": {"$ref": f"#/components/schemas/{PROBLEM}"}}}
    role_checked = _role_checked_operations(generator)
    throttled = _throttle_scopes(generator)
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if method not in METHODS:
                continue
            responses = operation.setdefault("responses", {})
            statuses = error_statuses(
                path,
                method,
                operation,
                role_checked=(path, method) in role_checked,
                throttled=throttled.get((path, method), NONE),
            )
            for status in sorted(statuses):
                response = responses.setdefault(str(status), {"description": DESCRIPTIONS[status]})
                response.setdefault("content", problem)
            for media in operation.get("requestBody", {}).get("content", {}).values():
                _close_objects(media.get("schema", {}), schemas, seen=set())
    return result


def _role_checked_operations(generator: Any) -> set[tuple[str, str]]:
    """(path, method) of the operations whose permission classes check more than "signed in"."""
    from rest_framework.permissions import AllowAny, IsAuthenticated

    checked = set()
    for path, _regex, method, view in getattr(generator, "endpoints", None) or ():
        classes = getattr(view.cls, "permission_classes", ())
        if any(cls not in (IsAuthenticated, AllowAny) for cls in classes):
            checked.add((path, method.lower()))
    return checked


def _throttle_scopes(generator: Any) -> dict[tuple[str, str], frozenset[str]]:
    """(path, method) -> the per-user throttle scopes (``turns``, ``writes``) its view counts against."""
    by_class = {throttle: scope for scope, throttle in THROTTLES.items()}
    scopes = {}
    for path, _regex, method, view in getattr(generator, "endpoints", None) or ():
        classes = getattr(view.cls, "throttle_classes", ())
        scopes[(path, method.lower())] = frozenset(by_class[cls] for cls in classes if cls in by_class)
    return scopes


def _close_objects(schema: dict[str, Any], schemas: dict[str, Any], *, seen: set[str]) -> None:
    ref = schema.get("$ref")
    if ref:
        name = ref.rsplit("/", 1)[-1]
        if name in seen or name in LENIENT_BODIES or name not in schemas:
            return
        seen.add(name)
        _close_objects(schemas[name], schemas, seen=seen)
        return
    for sub in schema.get("allOf", []) + schema.get("oneOf", []) + schema.get("anyOf", []):
        _close_objects(sub, schemas, seen=seen)
    if "items" in schema and isinstance(schema["items"], dict):
        _close_objects(schema["items"], schemas, seen=seen)
    properties = schema.get("properties")
    if schema.get("type") == "object" and properties and "additionalProperties" not in schema:
        schema["additionalProperties"] = False
    for sub in (properties or {}).values():
        _close_objects(sub, schemas, seen=seen)
