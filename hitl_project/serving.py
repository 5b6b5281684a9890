"""One port, two handlers: what must stream goes through Django's ASGI handler, the rest of the API
through its WSGI handler on a thread pool (docs/decisions/0012-rest-through-wsgi-on-the-asgi-port.md).

Django's ASGI handler runs a synchronous view through ``sync_to_async``: every request hops onto the one
thread all synchronous code of the process shares, with a context copied in and out, and pays about
twice the CPU of the same request under a WSGI server. The REST API is synchronous, so it is served by
``django.core.handlers.wsgi.WSGIHandler`` on a thread pool (``hitl_project.wsgi_bridge``:
``HITL_WSGI_THREADS`` threads, each with its own database connection, from the pool with
``HITL_DB_POOL``): the WSGI handler's cost, under the ASGI server that also serves ``/mcp`` and the event
streams. A response's ``close()`` (where
``conversations.api.conversation_views.ThenRun`` runs a continuation once the answer is out) runs on the
request's thread after the last byte was handed to the server, as under a WSGI server.

What streams stays on the ASGI handler (``on_asgi``): the event streams (a path ending in ``/stream`` or
``/events``), the ledger's export (``/audit/export``) and the admin (its ledger export streams too). A
stream holds its connection for minutes, and on the thread pool it would hold a thread; worse, a WSGI
thread does not learn that its client went away, so an export would run on to its end with its
transaction open, where the ASGI handler stops it. Either handler answers any path alike (the same
Django, the same URLs): the choice is about cost and streams, never about what is answered.
"""

from __future__ import annotations

from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from starlette.types import ASGIApp, Receive, Scope, Send

from hitl_project.admin_messages import ADMIN_PATH
from hitl_project.wsgi_bridge import ThreadPoolWSGI

STREAM_SUFFIXES = ("/stream", "/events")
STREAM_PATHS = frozenset({"/audit/export"})


def on_asgi(path: str) -> bool:
    """Whether a path is served by the ASGI handler (what streams), not the thread pool."""
    return path.endswith(STREAM_SUFFIXES) or path in STREAM_PATHS or path.startswith(ADMIN_PATH)


def rest_through_wsgi(asgi_django: ASGIApp) -> ASGIApp:
    threaded = ThreadPoolWSGI(WSGIHandler(), workers=settings.HITL_WSGI_THREADS)

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not on_asgi(scope["path"]):
            await threaded(scope, receive, send)
        else:
            await asgi_django(scope, receive, send)

    return application
