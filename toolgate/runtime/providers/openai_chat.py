"""The ``openai`` provider: any OpenAI-compatible Chat Completions endpoint through the official SDK.

Provider config: ``{"type": "openai", "model", "baseUrl"?, "apiKey"?}``. ``apiKey`` may hold
``${env:NAME}`` references (resolved when the model is built; ``${caller:token}`` is refused); without
it ``OPENAI_API_KEY`` applies, else the placeholder key ``not-set`` (local endpoints often need none).
Tool calls the model makes are returned as ToolCall(id, name, arguments JSON text); a call without an
id gets ``gen-<uuid>``. Calls of non-function tool types are ignored.
"""

from __future__ import annotations

import os
from typing import Any

import openai

from toolgate.gate.tools import ToolCall
from toolgate.outbound.http_requests import SecretReferenceError, resolve_secret_references
from toolgate.runtime.providers.turn import ModelError, ModelTurn, generated_call_id

DEFAULT_TIMEOUT_SECONDS = 60.0
KEY_PLACEHOLDER = "not-set"


class OpenAIChatModel:
    def __init__(self, provider: dict[str, Any], *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        self.model = str(provider.get("model") or "")
        if not self.model:
            raise ModelError("the openai provider needs a model")
        api_key = provider.get("apiKey")
        try:
            resolved_key = (
                resolve_secret_references(str(api_key), caller_token=None, allow_caller=False)
                if api_key is not None
                else os.environ.get("OPENAI_API_KEY")
            )
        except SecretReferenceError as error:
            raise ModelError(f"provider.apiKey: {error}") from error
        self.client = openai.OpenAI(
            base_url=provider.get("baseUrl") or None,
            api_key=resolved_key or KEY_PLACEHOLDER,
            timeout=timeout,
        )

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, user_input: str
    ) -> ModelTurn:
        request: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            request["tools"] = tools
        try:
            response = self.client.chat.completions.create(**request)
        except openai.APIStatusError as error:
            raise ModelError(f"the model endpoint answered HTTP {error.status_code}") from error
        except openai.OpenAIError as error:
            raise ModelError(f"the model could not be reached: {type(error).__name__}") from error
        if not response.choices:
            raise ModelError("the model answered without a choice")
        message = response.choices[0].message
        calls = [
            ToolCall(
                id=call.id or generated_call_id(),
                name=call.function.name,
                arguments=call.function.arguments or "{}",
            )
            for call in message.tool_calls or []
            if getattr(call, "function", None) is not None
        ]
        return ModelTurn(content=message.content, tool_calls=calls)
