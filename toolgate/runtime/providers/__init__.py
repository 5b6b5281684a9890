"""Chat models for the ``llm`` task: ``chat_model_for(provider)`` builds one from the task's provider config."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from toolgate.runtime.providers.scripted import ScriptedChatModel
from toolgate.runtime.providers.turn import (
    ChatModel,
    ModelError,
    ModelTurn,
    generated_call_id,
    tool_result_message,
)

__all__ = [
    "ChatModel",
    "ModelError",
    "ModelTurn",
    "chat_model_for",
    "generated_call_id",
    "tool_result_message",
]


def chat_model_for(provider: dict[str, Any]) -> ChatModel:
    """The model of ``provider`` (``{"type": "openai", …}`` or ``{"type": "scripted", "script": […]}``).

    Raises ModelError for an unknown type or a configuration that cannot be used (e.g. an apiKey
    reference to an unset environment variable).
    """
    kind = provider.get("type")
    if kind == "scripted":
        return ScriptedChatModel(list(provider.get("script") or []))
    if kind == "openai":
        # local import: the openai client library loads only in a process that talks to a model
        from toolgate.runtime.providers.openai_chat import DEFAULT_TIMEOUT_SECONDS, OpenAIChatModel

        timeout = float(getattr(settings, "HITL_LLM_TIMEOUT_SECONDS", DEFAULT_TIMEOUT_SECONDS))
        return OpenAIChatModel(provider, timeout=timeout)
    raise ModelError(f"unknown provider type: {kind!r}")
