"""The ``httpcalls`` task: declared calls fired by the step's actions.

Rules:

- A call fires when any of its ``actions`` is among ``memory.current.actions``; a call without
  ``actions`` never fires here (it is offered to the LLM as a tool instead). Calls fire in document order.
- The result is stored under the call's name in ``memory.current.outputs`` (so later tasks and templates
  read ``{memory.current.<name>.body.id}``): ``{"status", "body"}``, or ``{"error"}`` when the request
  could not be built or sent. A failed call never fails the turn.
- A cancel of the turn recorded while a call is in flight stops the task before its next call.
- ``fireAndForget`` calls are sent with a short timeout and their body is never read; they store
  ``{"sent": true, "status": <int or null>}``.
- What was sent is appended to ``data["httpcalls:requests"]`` through the one redaction filter
  (toolgate.redaction): URL, header and query values, and the body; the request actually sent is untouched.
"""

from __future__ import annotations

from typing import Any

from conversations.pipeline.memory import ConversationMemory
from conversations.pipeline.registry import TurnContext
from toolgate.http_requests import (
    BuiltRequest,
    HttpCallError,
    build_request,
    send_request,
    send_without_waiting,
    without_secrets,
)
from toolgate.redaction import redact, redact_headers, redact_query_pairs, redact_uri

FIRE_AND_FORGET_TIMEOUT_SECONDS = 2.0


def run(task: dict[str, Any], memory: ConversationMemory, turn: TurnContext) -> None:
    from django.conf import settings

    timeout = float(settings.HITL_HTTP_TIMEOUT_SECONDS)
    step = memory.current
    caller_token = memory.caller.token if memory.caller else None
    fired = 0
    for call in task.get("calls") or []:
        triggers = call.get("actions") or []
        name = call.get("name")
        if not name or not any(action in step.actions for action in triggers):
            continue
        if fired:
            turn.stop_if_cancelled()  # a cancel that landed during the previous call stops the next one
        fired += 1
        try:
            built = build_request(task, call, memory.template_data(), caller_token=caller_token)
            record = sent_record(name, built)
        except HttpCallError as error:
            step.outputs[name] = {"error": str(error)}
            continue
        step.data.setdefault("httpcalls:requests", []).append(record)
        step.outputs[name] = without_secrets(
            _perform(built, fire_and_forget=bool(call.get("fireAndForget")), timeout=timeout), built.secrets_used)


def sent_record(call_name: str, built: BuiltRequest) -> dict[str, Any]:
    """What was sent, safe to keep: URL, header values, query values and body redacted (copies only)."""
    uri, query = built.target()
    record = {
        "call": call_name,
        "method": built.method,
        "url": redact_uri(uri),
        "query": [[name, value] for name, value in redact_query_pairs(query)],
        "headers": redact_headers(built.headers_to_send()),
        "body": redact(built.body.decode("utf-8", errors="replace")) if built.body is not None else None,
    }
    return without_secrets(record, built.secrets_used)


def _perform(built: BuiltRequest, *, fire_and_forget: bool, timeout: float) -> dict[str, Any]:
    try:
        if fire_and_forget:
            status = send_without_waiting(built, timeout=min(timeout, FIRE_AND_FORGET_TIMEOUT_SECONDS))
            return {"sent": True, "status": status}
        result = send_request(built, timeout=timeout)
        return {"status": result.status, "body": result.body}
    except HttpCallError as error:
        return {"error": str(error)}
    except Exception as error:  # a declared call must never fail the turn
        return {"error": f"{type(error).__name__}: {error}"}
