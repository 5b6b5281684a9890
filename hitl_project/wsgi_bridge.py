"""Django's WSGI handler on a thread pool, under the ASGI server: a request's body read on the event loop,
its answer handed back in one hop.

a2wsgi's bridge is general: the thread reads the body by asking the event loop for it, and hands every
part of the answer (the status line, each body chunk, the end) to the loop one at a time, waiting for
each. Every such hop wakes the loop and switches threads: on the approval cycle's three small JSON
requests, about a tenth of the web process's CPU. Here, a request whose body's length is known
(``Content-Length`` up to ``BUFFERED_BODY_LIMIT``, or no body) is read whole on the loop before its
thread starts, and an answer that is not streamed (Django's ``HttpResponse``) goes back in one hop: the
status line and the body together. A streamed answer goes back chunk by chunk. A chunked body is read
whole on the loop too, up to Django's limit on a body (``DATA_UPLOAD_MAX_MEMORY_SIZE``; Django answers 413
beyond it), and handed over with the length it turned out to have: a WSGI application reads only
``CONTENT_LENGTH`` bytes. A larger body of known length takes a2wsgi's path, on the same threads.

As under a WSGI server, the response's ``close()`` runs on the request's thread once the last byte is
handed to the server: Django's ``request_finished`` (which gives the thread's database connection back),
and ``conversations.api.conversation_views.ThenRun`` (a continuation that runs once the answer is out).
"""

from __future__ import annotations

import asyncio
import io
import sys
from collections.abc import Callable, Iterable
from typing import Any

from a2wsgi import WSGIMiddleware
from a2wsgi.wsgi import build_environ
from django.conf import settings
from django.http import HttpResponse
from starlette.types import Message, Receive, Scope, Send

# A body up to this size that says its length is read on the event loop; larger ones stream to the thread.
BUFFERED_BODY_LIMIT = 1024 * 1024

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def declared_length(scope: Scope) -> int | None:
    """How long the request's body is: its one numeric ``Content-Length``, or 0 when it has neither that
    nor ``Transfer-Encoding`` (HTTP/1.1: no body); None when the body's length is not known up front."""
    lengths = [value for name, value in scope["headers"] if name in (b"content-length", b"transfer-encoding")]
    if not lengths:
        return 0
    if len(lengths) != 1 or not lengths[0].isdigit():
        return None
    return int(lengths[0])


class ThreadPoolWSGI:
    """The ASGI application that serves ``app`` (a WSGI application) on ``workers`` threads."""

    def __init__(self, app: WSGIApp, *, workers: int) -> None:
        self.app = app
        self.streamed = WSGIMiddleware(app, workers=workers)
        self.executor = self.streamed.executor  # one pool: a2wsgi's path runs on the same threads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.streamed(scope, receive, send)
            return
        length = declared_length(scope)
        if length is not None and length > BUFFERED_BODY_LIMIT:
            await self.streamed(scope, receive, send)
            return
        body = await read_body(receive, up_to=chunked_body_limit() + 1 if length is None else length)
        loop = asyncio.get_running_loop()
        environ = build_environ(scope, io.BytesIO(body))  # type: ignore[arg-type]  # any file-like object
        environ["wsgi.errors"] = sys.stderr
        if length is None:  # a WSGI application reads CONTENT_LENGTH bytes: a chunked body says its own
            environ["CONTENT_LENGTH"] = str(len(body))
        await loop.run_in_executor(self.executor, self._serve, environ, loop, send)

    def _serve(self, environ: dict[str, Any], loop: asyncio.AbstractEventLoop, send: Send) -> None:
        """On a pool thread: run the application, hand its answer to the loop, then close it here."""
        started: list[Message] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable:
            code = int(status.split(" ", 1)[0])
            started[:] = [
                {
                    "type": "http.response.start",
                    "status": code,
                    "headers": [
                        (name.lower().encode("latin1"), value.encode("latin1")) for name, value in headers
                    ],
                }
            ]
            return lambda chunk: hand_over(loop, send, [body_message(chunk, more=True)])

        response = self.app(environ, start_response)
        try:
            if isinstance(response, HttpResponse):
                hand_over(loop, send, [*started, body_message(response.content, more=False)])
                return
            hand_over(loop, send, started)
            for chunk in response:
                if chunk:
                    hand_over(loop, send, [body_message(chunk, more=True)])
            hand_over(loop, send, [body_message(b"", more=False)])
        finally:
            close = getattr(response, "close", None)
            if close is not None:
                close()


def chunked_body_limit() -> int:
    """How much of a chunked body is read: Django's own limit on a body (over it, Django answers 413)."""
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE or BUFFERED_BODY_LIMIT


async def read_body(receive: Receive, *, up_to: int) -> bytes:
    """The request's body, or its first ``up_to`` bytes and a little more when it is longer."""
    chunks, read = [], 0
    while read < up_to:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        chunks.append(chunk)
        read += len(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def body_message(chunk: bytes, *, more: bool) -> Message:
    return {"type": "http.response.body", "body": chunk, "more_body": more}


def hand_over(loop: asyncio.AbstractEventLoop, send: Send, messages: list[Message]) -> None:
    """Send ``messages`` on the event loop, in order, and wait until the server has taken them."""

    async def sent() -> None:
        for message in messages:
            await send(message)

    asyncio.run_coroutine_threadsafe(sent(), loop).result()
