"""The ``scripted`` provider: a deterministic model for demos and tests (docs/tool-gating.md).

Each call takes the FIRST ``script`` entry whose ``when`` holds:

- ``{"inputContains": "transfer"}``: the turn's user input contains the text, case-insensitive;
- ``{"afterToolResults": true}``: the newest message is a tool result (``false``: it is not);
- no ``when`` (or an empty one): always. Several conditions in one ``when`` must all hold.

An entry answers ``toolCalls`` (``[{"id", "name", "arguments": {…}}]``; arguments are serialized to
JSON text, a missing id becomes ``gen-<uuid>``) or ``reply`` (text). In a reply ``{toolResults}``
expands to a JSON array of ``{"name", "status", "result"}`` for the tool results just received (the
trailing run of tool messages): ``result`` is the message content parsed as JSON (the text when it is
not JSON), ``status`` is the result's own ``status`` field when it is a JSON object that has a string one, else
``"OK"``, and ``name`` comes from matching ``tool_call_id`` against the preceding assistant message's
``tool_calls``. No entry matches → the reply ``""``.
"""

from __future__ import annotations

import json
from typing import Any

from toolgate.providers.turn import ModelTurn, generated_call_id
from toolgate.tools import ToolCall

TOOL_RESULTS_PLACEHOLDER = "{toolResults}"


class ScriptedChatModel:
    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = script

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, user_input: str
    ) -> ModelTurn:
        for entry in (entry for entry in self.script if isinstance(entry, dict)):
            if _holds(entry.get("when"), messages, user_input):
                return _answer(entry, messages)
        return ModelTurn(content="")


def _holds(when: dict[str, Any] | None, messages: list[dict[str, Any]], user_input: str) -> bool:
    if not when:
        return True
    if "inputContains" in when and str(when["inputContains"]).casefold() not in (user_input or "").casefold():
        return False
    if "afterToolResults" in when and bool(when["afterToolResults"]) != _newest_is_tool_result(messages):
        return False
    return True


def _newest_is_tool_result(messages: list[dict[str, Any]]) -> bool:
    return bool(messages) and messages[-1].get("role") == "tool"


def _answer(entry: dict[str, Any], messages: list[dict[str, Any]]) -> ModelTurn:
    if entry.get("toolCalls") is not None:
        return ModelTurn(content=None, tool_calls=[_tool_call(call) for call in entry["toolCalls"]])
    reply = str(entry.get("reply") or "")
    if TOOL_RESULTS_PLACEHOLDER in reply:
        summary = json.dumps(tool_results_summary(messages), separators=(",", ":"), ensure_ascii=False)
        reply = reply.replace(TOOL_RESULTS_PLACEHOLDER, summary)
    return ModelTurn(content=reply)


def _tool_call(call: dict[str, Any]) -> ToolCall:
    arguments = call.get("arguments")
    return ToolCall(
        id=str(call.get("id") or generated_call_id()),
        name=str(call.get("name") or ""),
        arguments=json.dumps(
            arguments if arguments is not None else {}, separators=(",", ":"), ensure_ascii=False
        ),
    )


def tool_results_summary(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``[{"name", "status", "result"}]`` for the trailing run of tool messages (see module rules)."""
    start = len(messages)
    while start > 0 and messages[start - 1].get("role") == "tool":
        start -= 1
    names = _call_names(next((m for m in reversed(messages[:start]) if m.get("role") == "assistant"), {}))
    summary = []
    for message in messages[start:]:
        result = _parsed(message.get("content"))
        # a HITL outcome names itself (REJECTED_BY_REVIEWER, NOT_EXECUTED, …); an HTTP status code is not one
        own = result.get("status") if isinstance(result, dict) else None
        status = own if isinstance(own, str) else "OK"
        summary.append(
            {"name": names.get(message.get("tool_call_id"), ""), "status": status, "result": result}
        )
    return summary


def _call_names(message: dict[str, Any]) -> dict[str, str]:
    return {
        call.get("id"): (call.get("function") or {}).get("name", "")
        for call in message.get("tool_calls") or []
        if isinstance(call, dict)
    }


def _parsed(content: Any) -> Any:
    if not isinstance(content, str):
        return content
    try:
        return json.loads(content)
    except ValueError:
        return content
