"""A LangChain agent whose refund tool waits for a person: the pause is LangGraph's, the reviewer the
HITL service's (web, Slack, MCP or REST). Exits 0 once the refund was approved and ran, 1 when it was
rejected, 2 on an error.

    HITL_URL=https://hitl.example HITL_TOKEN=<an agent token> python langgraph_refund.py

With OPENAI_API_KEY set and langchain-openai installed the model is ChatOpenAI; otherwise a scripted
model asks for the refund. REFUND_URL (where the refund is POSTed) and RUN_ID (the thread id) are
optional.
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import Any

import httpx
from hitl_client import HitlClient, HitlError, NotApproved
from hitl_client.langgraph import ClaimApprovedCalls, decisions_for
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

REFUND_URL = os.environ.get("REFUND_URL", "")


@tool
def refund(order_id: str, amount: int) -> str:
    """Refund an order (amount in EUR)."""
    if REFUND_URL:
        httpx.post(REFUND_URL, json={"orderId": order_id, "amount": amount}).raise_for_status()
    return f"Refunded {amount} EUR on {order_id}"


class ScriptedModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def model() -> Any:
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from langchain_openai import ChatOpenAI  # local import: an optional dependency
        except ImportError:
            pass
        else:
            return ChatOpenAI(model="gpt-4o-mini")
    call = {"name": "refund", "args": {"order_id": "A-1", "amount": 250}, "id": "call-1"}
    return ScriptedModel(messages=iter([AIMessage("", tool_calls=[call]), AIMessage("Refund done.")]))


def main() -> int:
    hitl = HitlClient(os.environ["HITL_URL"], os.environ["HITL_TOKEN"], agent="refund-bot")
    gate = HumanInTheLoopMiddleware({"refund": True})
    agent = create_agent(
        model(),
        [refund],
        middleware=[gate, ClaimApprovedCalls(hitl, gate)],
        checkpointer=InMemorySaver(),
    )
    thread = os.environ.get("RUN_ID") or f"refund-{uuid.uuid4()}"
    config = {"configurable": {"thread_id": thread}}
    ask = {"messages": [{"role": "user", "content": "Refund 250 EUR on order A-1"}]}
    result = agent.invoke(ask, config, version="v2")
    decisions: list[str] = []
    while result.interrupts:
        print("waiting for a reviewer...", flush=True)
        paused = result.value["messages"]
        resume = decisions_for(hitl, result.interrupts[0], run_id=thread, messages=paused, timeout=3600)
        decisions += [decision["type"] for decision in resume["decisions"]]
        result = agent.invoke(Command(resume=resume), config, version="v2")
    for message in result.value["messages"]:
        if isinstance(message, ToolMessage | AIMessage) and message.content:
            print(f"{type(message).__name__}: {message.content}")
    return 0 if decisions and all(kind in ("approve", "edit") for kind in decisions) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (HitlError, NotApproved, httpx.HTTPError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
