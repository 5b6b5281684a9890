"""The peer behind HTTP: the graph of graph.py in a FastAPI app, the way a team would serve it.

    POST /threads                 a new thread id (LangGraph keeps no thread row: its first checkpoint is it)
    POST /threads/{id}/say        {"text": ...}: runs the thread to its interrupt -> the interrupts
    POST /threads/{id}/resume     {"verdict": ...}: answers the interrupt, runs to the end -> the final state
    GET  /threads/{id}            the thread's state: values, next nodes, open interrupts

Every request needs ``Authorization: Bearer $PEER_TOKEN``. Each uvicorn worker holds a connection pool of
``$PEER_POOL`` connections (default 4) to ``$PEER_DSN``; each request thread builds its PostgresSaver and
graph on that pool once. ``NoDelayProtocol`` is uvicorn's h11 protocol with TCP_NODELAY set on every
accepted socket, as ours is (hitl_project/uvicorn_protocol.py): run with
``--http peer.server:NoDelayProtocol``.
"""

from __future__ import annotations

import hmac
import os
import socket
import threading
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg_pool import ConnectionPool
from pydantic import BaseModel
from uvicorn.protocols.http.h11_impl import H11Protocol

from peer.graph import CONNECTION_SETTINGS, build_graph, pause, resume, thread_config


class NoDelayProtocol(H11Protocol):
    def connection_made(self, transport: Any) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)


class Worker:
    pool: ConnectionPool | None = None
    local = threading.local()


WORKER = Worker()
EXPECTED = ("Bearer " + os.environ.get("PEER_TOKEN", "")).encode()


@asynccontextmanager
async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
    size = int(os.environ.get("PEER_POOL", "4"))
    WORKER.pool = ConnectionPool(
        os.environ["PEER_DSN"], min_size=size, max_size=size, kwargs=CONNECTION_SETTINGS, open=True
    )
    WORKER.pool.wait()
    try:
        yield
    finally:
        WORKER.pool.close()


def graph() -> Any:
    """This request thread's graph, built on the worker's pool the first time the thread serves."""
    built = getattr(WORKER.local, "graph", None)
    if built is None:
        built = WORKER.local.graph = build_graph(PostgresSaver(WORKER.pool))
    return built


async def bearer(authorization: str | None = Header(default=None)) -> None:
    if not os.environ.get("PEER_TOKEN") or authorization is None:
        raise HTTPException(status_code=401, detail="no token")
    if not hmac.compare_digest(authorization.encode(), EXPECTED):
        raise HTTPException(status_code=401, detail="wrong token")


app = FastAPI(
    lifespan=lifespan, dependencies=[Depends(bearer)], openapi_url=None, docs_url=None, redoc_url=None
)


class SayBody(BaseModel):
    text: str


class ResumeBody(BaseModel):
    verdict: str


def interrupts(items: Any) -> list[dict[str, Any]]:
    return [{"id": item.id, "value": item.value} for item in items or ()]


@app.post("/threads", status_code=201)
async def create_thread() -> dict[str, Any]:
    return {"thread_id": str(uuid.uuid4())}


@app.post("/threads/{thread_id}/say")
def say(thread_id: str, body: SayBody) -> dict[str, Any]:
    try:
        stopped = pause(graph(), thread_id, body.text)
    except RuntimeError as error:
        raise HTTPException(status_code=500, detail=str(error)) from None
    return {"thread_id": thread_id, "interrupts": interrupts(stopped)}


@app.post("/threads/{thread_id}/resume")
def answer(thread_id: str, body: ResumeBody) -> dict[str, Any]:
    try:
        state = resume(graph(), thread_id, {"verdict": body.verdict})
    except RuntimeError as error:
        raise HTTPException(status_code=409, detail=str(error)) from None
    return {"thread_id": thread_id, "state": state}


@app.get("/threads/{thread_id}")
def read_thread(thread_id: str) -> dict[str, Any]:
    snapshot = graph().get_state(thread_config(thread_id))
    if snapshot.metadata is None:
        raise HTTPException(status_code=404, detail="no such thread")
    return {
        "thread_id": thread_id,
        "values": snapshot.values,
        "next": list(snapshot.next),
        "interrupts": interrupts(snapshot.interrupts),
    }
