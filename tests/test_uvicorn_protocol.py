"""The uvicorn protocol class sets TCP_NODELAY on every accepted socket (uvicorn issue #3149)."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import uvicorn

from hitl_project.uvicorn_protocol import NoDelayH11Protocol

seen: list[int] = []


class RecordingProtocol(NoDelayH11Protocol):
    def connection_made(self, transport):  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


async def app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def test_accepted_sockets_have_tcp_nodelay_set():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(app, port=port, http=RecordingProtocol, log_level="warning", lifespan="off")
    listening = config.bind_socket()  # as uvicorn's --workers supervisor does before it forks
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert httpx.get(f"http://127.0.0.1:{port}/").text == "ok"
    finally:
        server.should_exit = True
        thread.join(10)
    assert seen and all(flag != 0 for flag in seen)
