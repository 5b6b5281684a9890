"""The ASGI application: /mcp (the MCP server behind token authentication) beside Django.

Exactly the path ``/mcp`` goes to a Starlette app holding the SDK's streamable HTTP endpoint (its lifespan
runs the SDK's session manager); every other path goes to Django's ASGI handler, whose answers (a 404
included) are the API's problem details. Stateless, JSON answers: every tool call is
one HTTP request (any worker may answer it; nothing to resume after a restart). ASGI only: WSGI
servers serve Django without /mcp.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_surface.identity import TokenRequired, transport_security
from mcp_surface.server import build_server

PATH = "/mcp"


def with_mcp(django_app: ASGIApp) -> ASGIApp:
    server = build_server()
    server.streamable_http_app(  # builds the session manager the endpoint below runs on
        streamable_http_path=PATH,
        stateless_http=True,
        json_response=True,
        transport_security=transport_security(),
    )
    endpoint = TokenRequired(StreamableHTTPASGIApp(server.session_manager))

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    mcp_app = Starlette(routes=[Route(PATH, endpoint=endpoint)], lifespan=lifespan)

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        # A comparison, not route patterns: Starlette's do not match a path holding a newline (its own
        # text/plain 404 in front of Django's problem details), and their "$" matches before one ("/mcp\n").
        if scope["type"] == "lifespan" or scope["path"] == PATH:
            await mcp_app(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return application
