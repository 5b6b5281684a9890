"""What a chat model answers for one call, and the interface every provider implements.

Messages are OpenAI Chat Completions dicts, so a transcript is plain JSON:
``{"role": "system" | "user" | "assistant" | "tool", "content": …}``; an assistant message that
calls tools carries ``"tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}]``
and each result is ``{"role": "tool", "tool_call_id": …, "content": <text>}``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolgate.gate.tools import ToolCall


class ModelError(Exception):
    """The model could not be configured or did not answer; the message is safe to store and show."""


@dataclass
class ModelTurn:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to the transcript."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return message


class ChatModel(Protocol):
    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, user_input: str
    ) -> ModelTurn:
        """The model's answer to ``messages`` with ``tools`` offered; ``user_input`` is this turn's input."""
        ...


def generated_call_id() -> str:
    """The id given to a tool call that arrived without one."""
    return "gen-" + uuid.uuid4().hex


def tool_result_message(call_id: str, result: Any) -> dict[str, Any]:
    """A tool message carrying ``result`` (a string as is, anything else as compact JSON)."""
    content = (
        result if isinstance(result, str) else json.dumps(result, separators=(",", ":"), ensure_ascii=False)
    )
    return {"role": "tool", "tool_call_id": call_id, "content": content}
