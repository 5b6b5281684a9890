"""uvicorn's h11 protocol with TCP_NODELAY set on every accepted socket.

With ``--workers N`` uvicorn leaves Nagle's algorithm on (uvicorn issue #3149), and each keep-alive
request then waits ~40-50 ms for a delayed ACK. Use ``--http hitl_project.uvicorn_protocol:NoDelayH11Protocol``.
"""

from __future__ import annotations

import asyncio
import socket

from uvicorn.protocols.http.h11_impl import H11Protocol


class NoDelayH11Protocol(H11Protocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        super().connection_made(transport)
