"""The peer's approval cycle: a three-node LangGraph graph that stops for a human between its nodes.

    parse (strips the turn) -> gate (``interrupt({"reason": "approve delete"})``) -> act (acts if approved)

``pause`` runs a new thread up to the interrupt; ``resume`` answers it with ``Command(resume=...)`` and
runs the thread to its end. The checkpointer is PostgresSaver on connections with the settings LangGraph
documents for it (autocommit, no prepared statements, dict rows), with its default durability: every
step's checkpoint is written before ``invoke`` returns.
"""

from __future__ import annotations

import uuid
from typing import Any, TypedDict

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

CONNECTION_SETTINGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
TURN = "  please delete file x  "
REASON = {"reason": "approve delete"}
APPROVED = {"verdict": "APPROVED"}


class Turn(TypedDict, total=False):
    turn: str
    verdict: str
    acted: bool


def parse(state: Turn) -> dict[str, Any]:
    return {"turn": state["turn"].strip()}


def gate(state: Turn) -> dict[str, Any]:
    answer = interrupt(REASON)
    return {"verdict": answer["verdict"]}


def act(state: Turn) -> dict[str, Any]:
    return {"acted": state.get("verdict") == "APPROVED"}


def build_graph(checkpointer: PostgresSaver) -> Any:
    graph = StateGraph(Turn)
    graph.add_node("parse", parse)
    graph.add_node("gate", gate)
    graph.add_node("act", act)
    graph.add_edge(START, "parse")
    graph.add_edge("parse", "gate")
    graph.add_edge("gate", "act")
    graph.add_edge("act", END)
    return graph.compile(checkpointer=checkpointer)


def thread_config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def new_thread_id() -> str:
    return str(uuid.uuid4())


def pause(graph: Any, thread_id: str, text: str = TURN) -> list[Any]:
    """Run a new thread up to its interrupt; the interrupts it stopped at."""
    out = graph.invoke({"turn": text}, thread_config(thread_id))
    if "__interrupt__" not in out:
        raise RuntimeError(f"the graph did not stop at the gate: {out!r}")
    return list(out["__interrupt__"])


def resume(graph: Any, thread_id: str, answer: dict[str, Any] = APPROVED) -> dict[str, Any]:
    """Answer the thread's interrupt and run it to its end; its final state."""
    out = graph.invoke(Command(resume=answer), thread_config(thread_id))
    if "__interrupt__" in out:
        raise RuntimeError(f"the thread is still stopped: {out!r}")
    return {key: value for key, value in out.items() if not key.startswith("__")}


def connect(dsn: str) -> psycopg.Connection:
    return psycopg.Connection.connect(dsn, **CONNECTION_SETTINGS)


def ensure_database(dsn: str, name: str) -> None:
    """Create database ``name`` when it is missing (through the server's ``postgres`` database)."""
    admin = make_conninfo(dsn, dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as connection:
        if not connection.execute("select 1 from pg_database where datname = %s", (name,)).fetchone():
            connection.execute(sql.SQL("create database {}").format(sql.Identifier(name)))


def reset_schema(dsn: str) -> None:
    """Drop the checkpointer's tables and let ``PostgresSaver.setup()`` create them empty."""
    with connect(dsn) as connection:
        connection.execute(
            "drop table if exists checkpoint_migrations, checkpoints, checkpoint_blobs, checkpoint_writes"
        )
        PostgresSaver(connection).setup()
