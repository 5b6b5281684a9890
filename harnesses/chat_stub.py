"""A local stub of the OpenAI Chat Completions protocol: a real HTTP server on loopback.

``POST /v1/chat/completions`` answers the next queued response (non-streaming, in the OpenAI response
format) and records every request body and its headers. Queue answers with ``reply`` (text),
``call_tools`` (tool calls) or ``fail`` (an error status); an empty queue answers 400 so a test that
asks the model once too often fails loudly instead of hanging (the SDK does not retry a 400).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMPLETIONS_PATH = "/v1/chat/completions"


@dataclass
class StubAnswer:
    status: int
    body: dict[str, Any]


@dataclass
class ChatStub:
    host: str = "127.0.0.1"
    port: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    answers: deque[StubAnswer | dict[str, Any]] = field(default_factory=deque)
    _ids: Iterator[int] = field(default_factory=itertools.count)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def reply(self, content: str) -> None:
        self.answers.append({"role": "assistant", "content": content})

    def call_tools(self, *calls: dict[str, Any], content: str | None = None) -> None:
        """Queue tool calls, each ``{"id"?, "name", "arguments": dict | str}`` (``"id": None`` sends null)."""
        tool_calls = []
        for number, call in enumerate(calls):
            arguments = call.get("arguments", {})
            tool_calls.append(
                {
                    "id": call["id"] if "id" in call else f"call_{len(self.requests)}_{number}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                    },
                }
            )
        self.answers.append({"role": "assistant", "content": content, "tool_calls": tool_calls})

    def fail(self, status: int, message: str = "stub failure") -> None:
        self.answers.append(StubAnswer(status, {"error": {"message": message, "type": "stub_error"}}))

    def answer(self, request: dict[str, Any]) -> StubAnswer:
        if not self.answers:
            return StubAnswer(
                400, {"error": {"message": "the stub has no scripted answer left", "type": "stub"}}
            )
        queued = self.answers.popleft()
        if isinstance(queued, StubAnswer):
            return queued
        return StubAnswer(
            200,
            {
                "id": f"chatcmpl-stub-{next(self._ids)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.get("model", "stub"),
                "choices": [
                    {
                        "index": 0,
                        "message": queued,
                        "finish_reason": "tool_calls" if queued.get("tool_calls") else "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )


def _handler_for(stub: ChatStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.path.split("?")[0] != COMPLETIONS_PATH:
                self._send(StubAnswer(404, {"error": {"message": f"no route {self.path}", "type": "stub"}}))
                return
            request = json.loads(raw or b"{}")
            stub.requests.append(request)
            stub.headers.append({name.lower(): value for name, value in self.headers.items()})
            self._send(stub.answer(request))

        def _send(self, answer: StubAnswer) -> None:
            body = json.dumps(answer.body).encode()
            self.send_response(answer.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def running_chat_stub() -> Iterator[ChatStub]:
    """A ChatStub serving on 127.0.0.1 and a free port until the block ends."""
    stub = ChatStub()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(stub))
    httpd.daemon_threads = True
    stub.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
