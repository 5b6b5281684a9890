"""A loopback target that records every request byte for byte and echoes it back.

It stands in for the real APIs an agent's tools reach: what a test asserts about "what reached the
target" is read here, as received on the socket (the request line before any decoding, every header,
the body). Its answer echoes the request (``{"echo": {"requestLine", "headers", "body"}}``), so anything
the request carried also comes back in the tool's result: the way a secret would travel on to the model,
the journal and the transcript if the service let it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    method: str
    target: str  # the request target exactly as on the request line: path and query, still encoded
    headers: tuple[tuple[str, str], ...]
    body: bytes

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def header(self, name: str) -> str | None:
        return next((value for key, value in self.headers if key.lower() == name.lower()), None)

    def text(self) -> str:
        """Everything received, as text: what a test searches for a value."""
        lines = [f"{self.method} {self.target}", *(f"{k}: {v}" for k, v in self.headers)]
        return "\n".join(lines) + "\n\n" + self.body.decode("utf-8", errors="replace")


@dataclass
class EchoTarget:
    host: str = "127.0.0.1"
    port: int = 0
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def requests_to(self, path_prefix: str) -> list[Received]:
        with self.lock:
            return [request for request in self.received if request.path.startswith(path_prefix)]


def _handler_for(target: EchoTarget) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            received = Received(self.command, self.path, tuple(self.headers.items()), body)
            with target.lock:
                target.received.append(received)
            answer: dict[str, Any] = {
                "echo": {
                    "requestLine": f"{self.command} {self.path}",
                    "headers": dict(self.headers.items()),
                    "body": body.decode("utf-8", errors="replace"),
                }
            }
            payload = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler


@contextmanager
def running_echo_target(host: str = "127.0.0.1") -> Iterator[EchoTarget]:
    """An EchoTarget serving on ``host`` (any loopback address) and a free port until the block ends."""
    target = EchoTarget(host=host)
    server = ThreadingHTTPServer((host, 0), _handler_for(target))
    server.daemon_threads = True
    target.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield target
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
