"""A Pydantic AI agent whose refund tool needs a reviewer's approval, given through the HITL service.

    HITL_URL=https://hitl.example HITL_TOKEN=<an agent token> python pydantic_ai_refund.py

The agent asks to refund order A-1; the run pauses on the gated tool (``requires_approval=True``), the
call is filed as an approval request, and the script waits until a reviewer decides it on any surface
(the admin inbox, Slack, the REST API). Approved (edited or not): the tool runs once, with the approved
arguments, and the script exits 0. Rejected, withdrawn or expired: the model hears why, the tool does not
run, exit 1. Any error: exit 2. ``REFUND_URL`` (optional) is where the tool posts the refund.

The model is OpenAI's when OPENAI_API_KEY is set and ``pydantic-ai-slim[openai]`` is installed, else a
scripted one that calls the tool and then answers with what the tool returned.
"""

from __future__ import annotations

import os
import sys
import uuid

os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")  # the example prints what it does, nothing else

import httpx
from hitl_client import HitlClient, HitlError
from hitl_client.pydantic_ai import report_outcomes, results_for
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

PROMPT = "Refund order A-1: 250 EUR, the parcel never arrived."


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls the refund tool once, then says what came back (the result, or the reviewer's answer)."""
    last = messages[-1]
    returned = (
        [part for part in last.parts if isinstance(part, ToolReturnPart)]
        if isinstance(last, ModelRequest)
        else []
    )
    if returned:
        return ModelResponse(parts=[TextPart(f"{returned[0].outcome}: {returned[0].content}")])
    return ModelResponse(
        parts=[ToolCallPart("refund", {"order_id": "A-1", "amount": 250}, tool_call_id="refund-1")]
    )


def model() -> Model | str:
    if os.environ.get("OPENAI_API_KEY"):
        try:
            import pydantic_ai.models.openai  # noqa: F401  (the openai extra)

            return "openai:gpt-4o-mini"
        except ImportError:
            pass
    return FunctionModel(scripted)


def main() -> int:
    refunded: list[dict[str, object]] = []
    agent = Agent(model(), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def refund(order_id: str, amount: int) -> str:
        """Refund an order (in EUR)."""
        refunded.append({"order_id": order_id, "amount": amount})
        if url := os.environ.get("REFUND_URL"):
            httpx.post(url, json={"orderId": order_id, "amount": amount}, timeout=10).raise_for_status()
        return f"refunded {amount} EUR on order {order_id}"

    run_id = os.environ.get("RUN_ID") or f"refund-{uuid.uuid4()}"
    with HitlClient(os.environ["HITL_URL"], os.environ["HITL_TOKEN"], agent="refund-bot") as hitl:
        paused = agent.run_sync(PROMPT)
        if not isinstance(paused.output, DeferredToolRequests):
            print(paused.output)
            return 1
        print(f"waiting for a reviewer (run {run_id})", flush=True)
        results = results_for(
            hitl, paused.output, run_id=run_id, reason="A refund needs a reviewer's approval"
        )
        if results is None:  # only with wait=False: a call still pending
            return 2
        resumed = agent.run_sync(message_history=paused.all_messages(), deferred_tool_results=results)
        report_outcomes(hitl, results, resumed.new_messages())
    print(resumed.output)
    return 0 if refunded else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (HitlError, httpx.HTTPError, KeyError) as error:
        print(f"error: {error!r}", file=sys.stderr)
        sys.exit(2)
