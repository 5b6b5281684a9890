"""The status of one approval request as server-sent events, until it leaves PENDING.

Rules:

- The first frame is the request's current status; after it, one frame per change. Each is
  ``event: status`` with ``data: {"id", "status"}`` (one line of JSON), then a blank line.
- The stream ends right after a status other than PENDING (APPROVED, REJECTED, CANCELLED, EXPIRED): a
  client that wants what was decided then reads the request (``GET /approval-requests/{id}``).
- While the status does not change, a comment ``: keep-alive`` goes out every
  ``HITL_SSE_KEEPALIVE_SECONDS``, so proxies and clients do not time the stream out.
- The status is read every ``POLL_SECONDS`` (one query by primary key, on the request's own thread and
  database connection); a client that goes away stops the reads.

The response is an *async* generator: under uvicorn Django sends each frame as it is made (a sync
iterator it would collect whole before sending). Access is checked before the stream starts, by the view.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import StreamingHttpResponse
from rest_framework.renderers import JSONRenderer

from approval_requests.models import ApprovalRequest, RequestStatus

MEDIA_TYPE = "text/event-stream"
STATUS_EVENT = "status"
KEEP_ALIVE = b": keep-alive\n\n"
POLL_SECONDS = 0.5


class EventStreamRenderer(JSONRenderer):
    """Lets a request that accepts only ``text/event-stream`` reach the view (DRF's content negotiation
    answers 406 to an Accept no renderer lists). The stream itself is a StreamingHttpResponse no renderer
    touches; what this renders is a refusal before the stream, a problem+json body."""

    media_type = MEDIA_TYPE
    format = "json"  # what it renders; and no ?format= choice for the schema to document


def frame(name: str, data: dict[str, Any]) -> bytes:
    """One event: its name and its data as one line of JSON, then the blank line that ends it."""
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _status_of(request_id: Any) -> str | None:
    return ApprovalRequest.objects.filter(pk=request_id).values_list("status", flat=True).first()


async def status_frames(
    request_id: Any, *, keepalive_seconds: float, poll_seconds: float = POLL_SECONDS
) -> AsyncIterator[bytes]:
    """The frames of the request's status (see the module) until it leaves PENDING (or is gone)."""
    read = sync_to_async(_status_of)
    shown: str | None = None
    quiet_since = time.monotonic()
    while True:
        status = await read(request_id)
        if status is None:
            return
        now = time.monotonic()
        if status != shown:
            yield frame(STATUS_EVENT, {"id": str(request_id), "status": status})
            if status != RequestStatus.PENDING:
                return
            shown, quiet_since = status, now
        elif now - quiet_since >= keepalive_seconds:
            yield KEEP_ALIVE
            quiet_since = now
        await asyncio.sleep(max(0.0, min(poll_seconds, quiet_since + keepalive_seconds - time.monotonic())))


def status_stream_response(request_id: Any) -> StreamingHttpResponse:
    """The 200 of the stream: not cached, and not buffered by a proxy (nginx reads X-Accel-Buffering)."""
    keepalive = max(0.01, float(settings.HITL_SSE_KEEPALIVE_SECONDS))
    response = StreamingHttpResponse(
        status_frames(request_id, keepalive_seconds=keepalive), content_type=MEDIA_TYPE
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
