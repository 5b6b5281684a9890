"""The ASGI application: /mcp (the MCP server behind token authentication) beside Django.

One Starlette app routes ``/mcp`` to the SDK's streamable HTTP endpoint and everything else to Django's
ASGI handler; its lifespan runs the SDK's session manager. Stateless, JSON answers: every tool call is
one HTTP request (any worker may answer it; nothing to resume after a restart). ASGI only: WSGI
servers serve Django without /mcp.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.types import ASGIApp

from mcp_surface.identity import TokenRequired, transport_security
from mcp_surface.server import build_server

PATH = "/mcp"


def with_mcp(django_app: ASGIApp) -> Starlette:
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

    return Starlette(routes=[Route(PATH, endpoint=endpoint), Mount("/", app=django_app)], lifespan=lifespan)
