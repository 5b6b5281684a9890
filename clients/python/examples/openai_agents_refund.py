"""An OpenAI Agents SDK agent whose refund tool waits for a reviewer of the HITL service.

    HITL_URL=https://hitl.example HITL_TOKEN=<an agent token> python openai_agents_refund.py

The model is scripted (it asks for one refund, then answers) unless OPENAI_API_KEY is set, then it is
a real one. REFUNDS_URL, if set, is where the tool posts the refund. Exits 0 once the refund was
approved (on any of the service's surfaces) and ran; 1 when it was not approved; 2 on an error.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import Any

import httpx
from agents import (
    Agent,
    Model,
    ModelResponse,
    Runner,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from hitl_client import AsyncHitlClient, HitlError, WaitTimeout
from hitl_client.models import APPROVED
from hitl_client.openai_agents import apply_decisions_async, report_outcomes_async
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText


@function_tool(needs_approval=True)
async def refund(order_id: str, amount: int) -> str:
    """Refund ``amount`` euros on the order ``order_id``."""
    if url := os.environ.get("REFUNDS_URL"):
        async with httpx.AsyncClient(timeout=10) as http:
            (await http.post(url, json={"orderId": order_id, "amount": amount})).raise_for_status()
    return f"refunded {amount} EUR on {order_id}"


class ScriptedModel(Model):
    """Asks for one refund; once the tool answered (or was refused), repeats what it was told."""

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = input if isinstance(input, list) else []
        told = [
            item for item in items if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        if not told:
            call = ResponseFunctionToolCall(
                type="function_call",
                call_id="call_refund_1",
                name="refund",
                arguments='{"order_id": "A-1", "amount": 250}',
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text=str(told[-1]["output"]), annotations=[])
        message = ResponseOutputMessage(
            type="message", id="msg_1", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


def agent() -> Agent[Any]:
    real = bool(os.environ.get("OPENAI_API_KEY"))
    if not real:
        set_tracing_disabled(True)
    return Agent(
        name="refund-bot",
        instructions="Refund order A-1 (250 EUR) with the refund tool, then say what happened.",
        tools=[refund],
        model="gpt-4.1-mini" if real else ScriptedModel(),
    )


async def main() -> int:
    bot = agent()
    run_id = os.environ.get("HITL_RUN_ID") or f"refund-{uuid.uuid4()}"
    result = await Runner.run(bot, "Refund order A-1.")
    async with AsyncHitlClient(os.environ["HITL_URL"], os.environ["HITL_TOKEN"], agent="refund-bot") as hitl:
        while result.interruptions:
            state = result.to_state()
            decisions = await apply_decisions_async(
                hitl, state, result.interruptions, run_id=run_id, reason="Refund over 100 EUR"
            )
            result = await Runner.run(bot, state)
            await report_outcomes_async(hitl, result, decisions)
            refused = [found for found in decisions.requests.values() if found.status != APPROVED]
            if refused:
                print(f"not approved: {result.final_output}")
                return 1
    print(result.final_output)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except (HitlError, WaitTimeout, httpx.HTTPError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
