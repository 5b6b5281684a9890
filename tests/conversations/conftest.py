"""Fixtures for pipeline tests: a real HTTP server on loopback that records what it received."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest


@dataclass
class ReceivedRequest:
    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class CannedResponse:
    status: int = 200
    body: bytes = b'{"ok": true}'
    content_type: str = "application/json"
    delay_seconds: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class LoopbackServer:
    """Answers every method on every path; ``respond`` sets the answer for one path."""

    host: str
    port: int
    received: list[ReceivedRequest] = field(default_factory=list)
    responses: dict[str, CannedResponse] = field(default_factory=dict)
    sequences: dict[str, list[CannedResponse]] = field(default_factory=dict)
    scheme: str = "http"
    # answers every request when set (e.g. by its headers), before ``responses`` and ``sequences``
    answering: Callable[[ReceivedRequest], CannedResponse] | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def respond(
        self,
        path: str,
        *,
        status: int = 200,
        json_body: Any = None,
        text: str | None = None,
        delay_seconds: float = 0.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        if text is not None:
            canned = CannedResponse(status, text.encode(), "text/plain; charset=utf-8", delay_seconds)
        else:
            canned = CannedResponse(status, json.dumps(json_body).encode(), "application/json", delay_seconds)
        canned.headers.update(headers or {})
        self.responses[path] = canned

    def respond_in_turn(self, path: str, *answers: tuple[int, Any]) -> None:
        """Answer ``path`` with each ``(status, json body)`` in turn; the last one then repeats."""
        self.sequences[path] = [CannedResponse(status, json.dumps(body).encode()) for status, body in answers]

    def answer(self, request: ReceivedRequest) -> CannedResponse:
        if self.answering is not None:
            return self.answering(request)
        return self.answer_for(request.path)

    def answer_for(self, path: str) -> CannedResponse:
        sequence = self.sequences.get(path)
        if sequence:
            return sequence.pop(0) if len(sequence) > 1 else sequence[0]
        return self.responses.get(path, CannedResponse())


def _handler_for(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            received = ReceivedRequest(
                method=self.command,
                path=parts.path,
                query=parse_qsl(parts.query, keep_blank_values=True),
                headers={name.lower(): value for name, value in self.headers.items()},
                body=body,
            )
            server.received.append(received)
            canned = server.answer(received)
            if canned.delay_seconds:
                time.sleep(canned.delay_seconds)
            try:
                self.send_response(canned.status)
                self.send_header("Content-Type", canned.content_type)
                self.send_header("Content-Length", str(len(canned.body)))
                for name, value in canned.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(canned.body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (fire-and-forget)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def running_loopback_server(
    host: str = "127.0.0.1", port: int = 0, *, tls: ssl.SSLContext | None = None
) -> Iterator[LoopbackServer]:
    """A ThreadingHTTPServer on ``host`` and ``port`` (0: a free one), HTTPS with the server context ``tls``,
    stopped on leaving."""
    recorder = LoopbackServer(host=host, port=port, scheme="https" if tls else "http")
    httpd = ThreadingHTTPServer((host, port), _handler_for(recorder))
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    httpd.daemon_threads = True
    recorder.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield recorder
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def loopback_server() -> Iterator[LoopbackServer]:
    """A ThreadingHTTPServer on 127.0.0.1 and a free port, stopped after the test."""
    with running_loopback_server() as recorder:
        yield recorder


@pytest.fixture
def audit_truncate_allowed_for_flush(transactional_db: None) -> Iterator[None]:
    """Django flushes (TRUNCATEs) the tables after a transactional test; let it past the audit trigger."""
    from django.db import connection

    yield
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hitl.audit_truncate', 'allow', false)")
