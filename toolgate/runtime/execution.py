"""Running one tool call and turning its outcome into the tool message the model reads."""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import unquote

from toolgate.gate.tools import ToolCall, ToolContext, ToolNotFound, ToolSet
from toolgate.outbound.http_requests import BuiltRequest, HttpCallError
from toolgate.outbound.redaction import redact

logger = logging.getLogger(__name__)

SELF_CONVERSATION = {
    "status": "NOT_EXECUTED",
    "reason": "an agent may not send a request to its own conversation",
}
UNCHECKABLE = {
    "status": "NOT_EXECUTED",
    "reason": "the request could not be resolved to check it before sending",
}


def parse_arguments(arguments: str) -> dict[str, Any]:
    value = json.loads(arguments or "{}")
    if not isinstance(value, dict):
        raise ValueError("tool arguments must be a JSON object")
    return value


def own_conversation_refusal(
    call: ToolCall, arguments: dict[str, Any], toolset: ToolSet, context: ToolContext
) -> dict[str, Any] | None:
    """The NOT_EXECUTED result when the call must not run, else None.

    An agent may not send a request to its own conversation (it would talk to, or decide, itself).
    Fail closed: a request that cannot be resolved for this check is refused, because a guard that
    cannot look must not wave the call through.
    """
    needle = context.conversation_id.lower()
    if not needle:
        return None
    if needle in unquote(call.arguments or "").lower():
        return dict(SELF_CONVERSATION)
    tool = toolset.tools.get(call.name)
    if tool is not None and tool.resolve is not None:
        try:
            built = tool.resolve(arguments, context)
            if targets_conversation(built, needle):
                return dict(SELF_CONVERSATION)
        except HttpCallError as exc:  # its message names no value (http_requests rules)
            return {"status": "NOT_EXECUTED", "reason": f"the request could not be built: {exc}"}
        except Exception as exc:
            logger.warning(
                "tool %s refused: its request could not be resolved (%s)", call.name, type(exc).__name__
            )
            return dict(UNCHECKABLE)
    return None


def targets_conversation(built: BuiltRequest, conversation_id: str) -> bool:
    """Whether ``built``'s URI or one of its query pairs names the conversation (URL-decoded, any case).

    Also checked on every attempt an http tool sends (a retry or a preRequest property instruction can
    change the request after it was resolved here)."""
    needle = conversation_id.lower()
    if not needle:
        return False
    uri, query = built.target()
    haystacks = [unquote(uri), *(unquote(f"{name}={value}") for name, value in query)]
    return any(needle in text.lower() for text in haystacks)


def run_call(
    call: ToolCall, toolset: ToolSet, context: ToolContext, *, arguments_text: str | None = None
) -> Any:
    """Run a call and return its result (JSON-able). Failures are results, never exceptions."""
    text = call.arguments if arguments_text is None else arguments_text
    try:
        tool = toolset.get(call.name)
    except ToolNotFound:
        return {"status": "NOT_EXECUTED", "reason": f"unknown tool '{call.name}'"}
    try:
        arguments = parse_arguments(text)
    except ValueError as exc:
        return {"status": "NOT_EXECUTED", "reason": f"invalid arguments: {exc}"}
    refusal = own_conversation_refusal(ToolCall(call.id, call.name, text), arguments, toolset, context)
    if refusal is not None:
        return refusal
    try:
        return tool.run(arguments, context)
    except Exception as exc:
        logger.warning("tool %s failed: %s", call.name, exc)
        # The message goes to the model and into the transcript: a source's error may quote a credential.
        return {"status": "ERROR", "error": f"{type(exc).__name__}: {redact(str(exc))}"}


def as_text(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)


def tool_message(call_id: str, result: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": as_text(result)}
