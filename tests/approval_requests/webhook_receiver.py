"""A webhook receiver for the tests: a real HTTP server on loopback, in a thread of its own.

It records every request (path, headers as sent, body bytes) and answers with the next status of its
script, the last one repeated once the script is used up. ``on_request`` runs in the server's thread
before it answers (what a receiver does with an event), and may return the status to answer instead.
Signatures are checked by ``verified`` with the real ``standardwebhooks`` library, as a receiver would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes


@dataclass
class WebhookReceiver:
    statuses: Sequence[int] = (200,)
    on_request: Callable[[Received], int | None] | None = None
    received: list[Received] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_port}/hooks/hitl"

    def start(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                headers = {name.lower(): value for name, value in self.headers.items()}
                got = Received(self.path, headers, self.rfile.read(length))
                status = receiver._status_for(len(receiver.received))
                receiver.received.append(got)
                if receiver.on_request is not None:
                    status = receiver.on_request(got) or status
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                receiver.arrived.set()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def _status_for(self, index: int) -> int:
        return self.statuses[min(index, len(self.statuses) - 1)]

    def verified(self, secret: str) -> list[dict[str, Any]]:
        """Every payload received, each verified with ``secret`` (WebhookVerificationError otherwise)."""
        return [Webhook(secret).verify(got.body, got.headers) for got in self.received]

    def ids(self) -> list[str]:
        return [got.headers["webhook-id"] for got in self.received]


@contextmanager
def receiving(statuses: Sequence[int] = (200,), **kwargs: Any) -> Iterator[WebhookReceiver]:
    """A started receiver, stopped when the block ends."""
    receiver = WebhookReceiver(statuses=statuses, **kwargs).start()
    try:
        yield receiver
    finally:
        receiver.stop()
