"""The ``httpcalls`` task: declared calls fired by the step's actions.

Rules:

- A call fires when any of its ``actions`` is among ``memory.current.actions``; a call without
  ``actions`` never fires here (it is offered to the LLM as a tool instead). Calls fire in document order.
- It runs through ``toolgate.outbound.http_calls.run_http_call``, the one implementation it shares with http tools:
  ``preRequest.propertyInstructions``, the attempts (a retry rebuilds the request from the memory the
  previous attempt wrote), ``postResponse.propertyInstructions``. Properties are written to this memory
  (``ConversationMemory.set_property``).
- The result is stored under the call's name in ``memory.current.outputs`` (so later tasks and templates
  read ``{memory.current.<name>.body.id}``), after every attempt: ``{"status", "body"}`` (plus
  ``"attempts"`` with a retry instruction), or ``{"error"}`` when the request could not be built or sent.
  A failed call never fails the turn.
- A cancel of the turn stops it before each call, and before each retry of a call in flight.
- ``fireAndForget`` calls are sent with a short timeout and their body is never read; they store
  ``{"sent": true, "status": <int or null>}``.
- In a continuation of a decided pause (``turn.continuing``) each call is a step of the execution journal
  (toolgate.runtime.step_journal): claimed before it runs, its result recorded after; a second run of the same
  continuation replays a recorded call and never sends a claimed one again (``outcomeUnknown``).
- What was sent, every attempt, is appended to ``data["httpcalls:requests"]``: the request's view (each
  injected secret named by its reference, toolgate.outbound.request_views) through the one redaction filter
  (toolgate.outbound.redaction): URL, header and query values, and the body; the request actually sent is
  untouched.
"""

from __future__ import annotations

from typing import Any

from conversations.pipeline.conversation_memory import ConversationMemory
from conversations.pipeline.registry import TurnContext
from toolgate.outbound import (
    BuiltRequest,
    CallEffects,
    redact,
    redact_headers,
    redact_query_pairs,
    redact_uri,
    run_http_call,
    without_secrets,
)
from toolgate.runtime import journaled


def run(task: dict[str, Any], memory: ConversationMemory, turn: TurnContext) -> None:
    step = memory.current
    caller_token = memory.caller.token if memory.caller else None
    for call in task.get("calls") or []:
        triggers = call.get("actions") or []
        name = call.get("name")
        if not name or not any(action in step.actions for action in triggers):
            continue
        turn.stop_if_cancelled()  # a cancel recorded meanwhile stops the turn before this call

        def store(result: dict[str, Any], name: str = name) -> None:
            step.outputs[name] = result

        def record(built: BuiltRequest, attempt: int, name: str = name) -> None:
            step.data.setdefault("httpcalls:requests", []).append(
                {**sent_record(name, built), "attempt": attempt}
            )

        def send(
            set_property: Any, call: dict[str, Any] = call, store: Any = store, record: Any = record
        ) -> Any:
            return run_http_call(
                task,
                call,
                memory.template_data(),
                caller_token=caller_token,
                effects=CallEffects(
                    set_property=set_property,
                    store_attempt=store,
                    record_sent=record,
                    before_retry=turn.stop_if_cancelled,
                ),
            )

        if turn.continuing is None:
            step.outputs[name] = send(memory.set_property)
        else:
            step.outputs[name] = journaled(
                turn.continuing, task, call, set_property=memory.set_property, run=send
            )


def sent_record(call_name: str, built: BuiltRequest) -> dict[str, Any]:
    """What was sent, safe to keep: the request's view (each injected value by its reference, so no
    encoding of a secret can slip through), with URL, header and query values and the body redacted."""
    view = built.view()
    record = {
        "call": call_name,
        "method": view.method,
        "url": redact_uri(view.uri),
        "query": [[name, value] for name, value in redact_query_pairs(view.query)],
        "headers": redact_headers(dict(view.headers)),
        "body": redact(view.body.decode("utf-8", errors="replace")) if built.body is not None else None,
    }
    return without_secrets(record, built.secrets_used)
