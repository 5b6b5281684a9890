"""Server-sent events of a group discussion: the frames, the keep-alives, and the bridge from the sync
services (they run member turns through the 1:1 engine, for minutes) to the stream uvicorn sends.

A stream runs its service in a worker thread of its own, whose event sink hands each event to the
event loop (``loop.call_soon_threadsafe``) and so never blocks on a slow client. The response is an
*async* generator: under uvicorn Django sends a sync iterator only once it has collected all of it
(Django's ASGI handler consumes a synchronous iterator before serving it); under WSGI it collects the
async one, so the events arrive together at the end (the project serves through uvicorn, scripts/start).

Rules (docs/groups.md, "SSE"):

- A closing event (``events.CLOSING_EVENTS``) is the last frame. The stream then waits, at most
  ``CLOSE_GRACE_SECONDS``, for the service to return, so a client that reads the discussion once the
  stream ended sees what the service committed; anything the service sends after it is dropped.
- Every stream ends with exactly one closing event. A service that raises sends ``group_error``
  ``{"status", "code", "message"}`` (an ``ApplicationError``'s, or 500 for anything else); one that
  returns without having sent one sends the closing event it returns (``StreamRun``).
- While nothing happens, a comment ``: keep-alive`` goes out every ``HITL_SSE_KEEPALIVE_SECONDS``, so
  proxies and clients do not time the stream out during a slow member turn.
- A client that goes away stops the stream, not the discussion: the service runs to its end (a
  discussion is run by the process that started it, under its lease) and its events are dropped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connections
from django.http import StreamingHttpResponse
from rest_framework.renderers import JSONRenderer

from common.errors import ApplicationError
from groups import events as ev

logger = logging.getLogger(__name__)

MEDIA_TYPE = "text/event-stream"
KEEP_ALIVE = b": keep-alive\n\n"
CLOSE_GRACE_SECONDS = 5.0
SERVER_ERROR = "the discussion failed (server error)"

Event = tuple[str, dict[str, Any]]
# Runs the service, telling its events to the sink; returns the closing event to send when the service
# sent none (a decision whose continuation was queued, one that could not start).
StreamRun = Callable[[ev.EventSink], Event]


class EventStreamRenderer(JSONRenderer):
    """Lets a request that accepts only ``text/event-stream`` reach the view (DRF's content negotiation
    answers 406 to an Accept no renderer lists). The stream itself is a StreamingHttpResponse that no
    renderer touches; what this renders is an error before the stream, a problem+json body."""

    media_type = MEDIA_TYPE
    format = "json"  # what it renders; and no ?format= choice for the schema to document


def frame(name: str, data: dict[str, Any]) -> bytes:
    """One event: ``event: <name>`` and its data as one line of JSON (json.dumps escapes every newline,
    so the data never splits into SSE lines), then the blank line that ends it."""
    payload = json.dumps(data, cls=DjangoJSONEncoder, separators=(",", ":"))
    return f"event: {name}\ndata: {payload}\n\n".encode()


def error_event(status: int, code: str, message: str, **extra: Any) -> Event:
    return ev.GROUP_ERROR, {"status": status, "code": code, "message": message, **extra}


def error_of(exc: ApplicationError, **known: Any) -> Event:
    """An ApplicationError as the ``group_error`` that closes the stream: what its HTTP problem would say."""
    return error_event(exc.status, exc.code, exc.detail, **known, **exc.extra)


_DONE = "<done>"  # not an event name: the worker thread's last item


class _Bridge:
    """The worker thread's side of a stream: it runs the service and hands each frame to the event loop
    (never blocking on it), until the stream is gone."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()
        self.gone = threading.Event()

    def put(self, item: tuple[str, bytes]) -> None:
        if self.gone.is_set():
            return
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: the server stopped, nobody listens any more
            self.gone.set()

    def sink(self, name: str, data: dict[str, Any]) -> None:
        self.put((name, frame(name, data)))

    def work(self, run: StreamRun) -> None:
        try:
            closing = run(self.sink)
        except ApplicationError as exc:
            closing = error_of(exc)
        except Exception:
            logger.exception("a streamed group discussion failed")
            closing = error_event(500, "INTERNAL", SERVER_ERROR)
        finally:
            connections.close_all()  # this thread's own connections: nothing else would ever close them
        self.put((_DONE, frame(*closing)))


async def event_frames(
    run: StreamRun, *, keepalive_seconds: float, close_grace_seconds: float = CLOSE_GRACE_SECONDS
) -> AsyncIterator[bytes]:
    """The frames of ``run``'s events (see the module). ``run`` starts, in a thread of its own, when the
    first frame is asked for."""
    bridge = _Bridge(asyncio.get_running_loop())
    threading.Thread(target=bridge.work, args=(run,), name="discussion-events").start()
    closed = False
    getter: asyncio.Future[tuple[str, bytes]] | None = None
    try:
        while True:
            getter = getter or asyncio.ensure_future(bridge.queue.get())
            # asyncio.wait, not wait_for: a timeout never cancels a get that already took an item
            done, _ = await asyncio.wait(
                {getter}, timeout=close_grace_seconds if closed else keepalive_seconds
            )
            if not done:
                if closed:
                    return  # the service is still finishing: the client has its closing event
                yield KEEP_ALIVE
                continue
            name, payload = getter.result()
            getter = None
            if name == _DONE:
                if not closed:
                    yield payload
                return
            if not closed:
                yield payload
                closed = name in ev.CLOSING_EVENTS
    finally:
        bridge.gone.set()
        if getter is not None:
            getter.cancel()


def event_stream_response(run: StreamRun) -> StreamingHttpResponse:
    """The 200 of a stream: not cached, and not buffered by a proxy (nginx reads X-Accel-Buffering)."""
    keepalive = max(0.01, float(settings.HITL_SSE_KEEPALIVE_SECONDS))
    response = StreamingHttpResponse(event_frames(run, keepalive_seconds=keepalive), content_type=MEDIA_TYPE)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
