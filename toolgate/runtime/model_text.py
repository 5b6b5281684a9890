"""What the model answers, made storable before anything else reads it.

The model's text, tool names and tool arguments are untrusted input: a prompt-injected model (or a
careless server) may answer a NUL or a lone surrogate, which PostgreSQL cannot store in a text or JSON
column, so the turn could neither continue nor record its own failure. The rule (``storable_turn``):
each such character becomes U+FFFD, in the answer's text, in each tool call's name and in each call's
arguments (as written, and inside its JSON strings, escaped or not, keys too); nothing else changes. What
is stored, what a reviewer is shown and what runs is that storable answer. Call ids have their own rule
(``toolgate.runtime.call_ids``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from toolgate.gate.tools import ToolCall
from toolgate.runtime.providers.turn import ModelTurn

REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """``text`` with every NUL and lone surrogate replaced by U+FFFD (a str holds no valid pair of them)."""
    return _UNSTORABLE.sub(REPLACEMENT, text) if _UNSTORABLE.search(text) else text


def storable_arguments(arguments: str) -> str:
    """Arguments text whose decoded JSON holds no NUL or lone surrogate either (an escaped ``\\u0000`` is
    storable text but not a storable JSON value): re-serialised only when one was found."""
    text = storable_text(arguments)
    if "\\u" not in text:
        return text
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError):
        return text
    cleaned = _storable_value(decoded)
    return text if cleaned == decoded else json.dumps(cleaned, ensure_ascii=False)


def _storable_value(value: Any) -> Any:
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(str(key)): _storable_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_storable_value(item) for item in value]
    return value


def storable_turn(turn: ModelTurn) -> ModelTurn:
    """The model's answer with its text, tool names and arguments made storable (see module rules)."""
    return ModelTurn(
        content=storable_text(turn.content) if turn.content is not None else None,
        tool_calls=[
            ToolCall(call.id, storable_text(call.name or ""), storable_arguments(call.arguments or "{}"))
            for call in turn.tool_calls
        ],
    )
