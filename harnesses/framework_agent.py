"""An agent of one framework (LangGraph, the OpenAI Agents SDK or Pydantic AI) as a process of its own,
its gated tool answered through the framework's adapter of ``hitl_client``. Run as
``python -m harnesses.framework_agent`` by tests/e2e/test_live_adapter_processes.py, which SIGKILLs it
at a chosen step and starts it again on the same state.

The agent asks once to refund order A-1 (a scripted model, so no LLM is needed); its ``refund`` tool
POSTs to ``--target-url`` + ``/refunds``. The framework keeps the paused run where a process that comes
after it finds it: LangGraph in its PostgreSQL checkpointer (``HITL_CHECKPOINT_DSN``), the Agents SDK as
the serialized ``RunState``, Pydantic AI as the message history and the deferred calls, the last two in
``--state-dir``. A process that finds a paused run resumes it instead of starting another.

Each step is written to ``--state-dir`` (fsynced) as it is reached: ``paused`` (the run paused on the
gated tool), ``filed`` (the adapter filed the approval request and it is still pending), ``claimed`` (the
tool starts: its approval was claimed, by the adapter or, for LangGraph, by its gate where the tool
runs), ``executed`` (the tool's request reached the target), ``done``. With ``--stop-after STEP`` the
process waits there to be killed.

Exit codes: 0 the tool ran and its outcome was reported; 1 the call was not approved (the model was told
why); 3 refused ``OUTCOME_UNKNOWN`` (an earlier process claimed the approval and may have run it: this one
runs nothing); 4 refused ``ALREADY_CLAIMED``. Only the framework, ``hitl_client`` and httpx: no Django.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import httpx
from hitl_client import AlreadyClaimed, HitlClient, OutcomeUnknown

from harnesses.claiming_agent import REFUSED_OUTCOME_UNKNOWN, mark, wait_to_be_killed

FRAMEWORKS = ("langgraph", "openai-agents", "pydantic-ai")
STEPS = ("filed", "claimed", "executed")
NOT_APPROVED, REFUSED_ALREADY_CLAIMED = 1, 4
ORDER, AMOUNT, REASON = "A-1", 250, "Refund over 100 EUR"
WAIT_SECONDS = 60.0


class Run:
    """What the harness needs to know of where it is: the state directory and the step to stop at."""

    def __init__(self, state_dir: Path, stop_after: str | None, target_url: str) -> None:
        self.state_dir = state_dir
        self.stop_after = stop_after
        self.target_url = target_url

    def step(self, name: str) -> None:
        mark(self.state_dir, name)
        wait_to_be_killed(self.stop_after, name)

    def refund(self, order_id: str, amount: int) -> str:
        """The gated tool's body, run only once its approval was claimed (the step ``claimed``): one POST
        to the target, then the step ``executed``."""
        self.step("claimed")
        sent = httpx.post(
            f"{self.target_url}/refunds", json={"orderId": order_id, "amount": amount}, timeout=30
        )
        sent.raise_for_status()
        self.step("executed")
        return f"refunded {amount} EUR on {order_id}"

    @property
    def paused(self) -> bool:
        return (self.state_dir / "paused").exists()

    def keep(self, name: str, text: str) -> None:
        mark(self.state_dir, name, text)

    def kept(self, name: str) -> str:
        return (self.state_dir / name).read_text()


class Agent(Protocol):
    """One framework's agent: ``pause`` runs it to the gated call and keeps the paused run; ``decide``
    answers the kept pause through the adapter (None while the request is pending, with ``wait=False``);
    ``resume`` runs on with the answer, reports the outcome and returns whether the tool was approved."""

    def pause(self) -> None: ...

    def decide(self, wait: bool) -> Any: ...

    def resume(self, answer: Any) -> bool: ...


RUN_ON = "run on"  # LangGraph's answer when no interrupt waits: run on from the last checkpoint


# --- LangGraph ----------------------------------------------------------------------------------------


class LangGraphAgent:
    def __init__(self, run: Run, hitl: HitlClient, run_id: str, saver: Any) -> None:
        from hitl_client.langgraph import ClaimApprovedCalls
        from langchain.agents import create_agent
        from langchain.agents.middleware import HumanInTheLoopMiddleware
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.tools import tool

        class ScriptedModel(GenericFakeChatModel):
            def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
                return self

        @tool
        def refund(order_id: str, amount: int) -> str:
            """Refund an order (amount in EUR)."""
            return run.refund(order_id, amount)

        call = {"name": "refund", "args": {"order_id": ORDER, "amount": AMOUNT}, "id": "call-1"}
        # the checkpoint holds the model's first answer once the run paused: it is asked only what comes next
        script = (
            [AIMessage("Done.")] if run.paused else [AIMessage("", tool_calls=[call]), AIMessage("Done.")]
        )
        gate = HumanInTheLoopMiddleware({"refund": True}, description_prefix=REASON)
        self.graph = create_agent(
            ScriptedModel(messages=iter(script)),
            [refund],
            middleware=[gate, ClaimApprovedCalls(hitl, gate)],
            checkpointer=saver,
        )
        self.hitl, self.run_id = hitl, run_id
        self.config = {"configurable": {"thread_id": run_id}}

    def pause(self) -> None:
        result = self.graph.invoke({"messages": [{"role": "user", "content": "Refund A-1"}]}, self.config)
        assert result.get("__interrupt__"), result

    def decide(self, wait: bool) -> Any:
        from hitl_client.langgraph import decisions_for

        state = self.graph.get_state(self.config)
        if not state.interrupts and state.next:
            return RUN_ON  # an earlier process died past the pause: LangGraph runs the pending node again
        [interrupt] = state.interrupts
        messages = state.values["messages"]
        return decisions_for(
            self.hitl, interrupt, run_id=self.run_id, messages=messages, wait=wait, timeout=WAIT_SECONDS
        )

    def resume(self, answer: Any) -> bool:
        from langgraph.types import Command

        self.graph.invoke(None if answer is RUN_ON else Command(resume=answer), self.config)
        return answer is RUN_ON or answer["decisions"][0]["type"] in ("approve", "edit")


# --- the OpenAI Agents SDK ------------------------------------------------------------------------------


class OpenAIAgentsAgent:
    def __init__(self, run: Run, hitl: HitlClient, run_id: str) -> None:
        from agents import Agent as SdkAgent
        from agents import Model, ModelResponse, Usage, function_tool, set_tracing_disabled
        from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

        class ScriptedModel(Model):
            """Asks for one refund; once the tool answered (or was refused), repeats what it was told."""

            async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any) -> Any:
                told = [
                    item
                    for item in input
                    if isinstance(item, dict) and item.get("type") == "function_call_output"
                ]
                if not told:
                    arguments = json.dumps({"order_id": ORDER, "amount": AMOUNT})
                    call = ResponseFunctionToolCall(
                        type="function_call", call_id="call_refund_1", name="refund", arguments=arguments
                    )
                    return ModelResponse(output=[call], usage=Usage(), response_id=None)
                text = ResponseOutputText(type="output_text", text=str(told[-1]["output"]), annotations=[])
                message = ResponseOutputMessage(
                    type="message", id="msg_1", role="assistant", status="completed", content=[text]
                )
                return ModelResponse(output=[message], usage=Usage(), response_id=None)

            def stream_response(self, *args: Any, **kwargs: Any) -> Any:
                raise NotImplementedError

        @function_tool(needs_approval=True)
        def refund(order_id: str, amount: int) -> str:
            """Refund ``amount`` euros on the order ``order_id``."""
            return run.refund(order_id, amount)

        set_tracing_disabled(True)
        self.agent = SdkAgent(name="refund-bot", tools=[refund], model=ScriptedModel())
        self.run, self.hitl, self.run_id = run, hitl, run_id
        self.state: Any = None

    def pause(self) -> None:
        from agents import Runner

        paused = asyncio.run(Runner.run(self.agent, "Refund order A-1."))
        assert paused.interruptions, paused
        self.run.keep("run-state.json", paused.to_state().to_string())

    def decide(self, wait: bool) -> Any:
        from agents import RunState
        from hitl_client.openai_agents import apply_decisions

        self.state = asyncio.run(RunState.from_string(self.agent, self.run.kept("run-state.json")))
        interruptions = self.state.get_interruptions()
        decisions = apply_decisions(
            self.hitl,
            self.state,
            interruptions,
            run_id=self.run_id,
            wait=wait,
            timeout=WAIT_SECONDS,
            reason=REASON,
        )
        return decisions or None

    def resume(self, answer: Any) -> bool:
        from agents import Runner
        from hitl_client.openai_agents import report_outcomes

        result = asyncio.run(Runner.run(self.agent, self.state))
        report_outcomes(self.hitl, result, answer)
        return bool(answer.claimed)


# --- Pydantic AI ----------------------------------------------------------------------------------------


class PydanticAIAgent:
    def __init__(self, run: Run, hitl: HitlClient, run_id: str) -> None:
        from pydantic_ai import Agent as PaiAgent
        from pydantic_ai import DeferredToolRequests
        from pydantic_ai.messages import (
            ModelMessage,
            ModelRequest,
            ModelResponse,
            TextPart,
            ToolCallPart,
            ToolReturnPart,
        )
        from pydantic_ai.models.function import AgentInfo, FunctionModel

        def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            last = messages[-1]
            for part in last.parts if isinstance(last, ModelRequest) else []:
                if isinstance(part, ToolReturnPart):
                    return ModelResponse(parts=[TextPart(f"{part.outcome}: {part.content}")])
            call = ToolCallPart("refund", {"order_id": ORDER, "amount": AMOUNT}, tool_call_id="refund-1")
            return ModelResponse(parts=[call])

        self.agent = PaiAgent(FunctionModel(scripted), output_type=[str, DeferredToolRequests])

        @self.agent.tool_plain(requires_approval=True)
        def refund(order_id: str, amount: int) -> str:
            """Refund an order (in EUR)."""
            return run.refund(order_id, amount)

        self.run, self.hitl, self.run_id = run, hitl, run_id

    def pause(self) -> None:
        from pydantic import TypeAdapter
        from pydantic_ai import DeferredToolRequests
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        paused = self.agent.run_sync("Refund order A-1: 250 EUR.")
        assert isinstance(paused.output, DeferredToolRequests), paused.output
        self.run.keep("messages.json", ModelMessagesTypeAdapter.dump_json(paused.all_messages()).decode())
        self.run.keep("deferred.json", TypeAdapter(DeferredToolRequests).dump_json(paused.output).decode())

    def decide(self, wait: bool) -> Any:
        from hitl_client.pydantic_ai import results_for
        from pydantic import TypeAdapter
        from pydantic_ai import DeferredToolRequests

        requests = TypeAdapter(DeferredToolRequests).validate_json(self.run.kept("deferred.json"))
        return results_for(
            self.hitl, requests, run_id=self.run_id, reason=REASON, wait=wait, timeout=WAIT_SECONDS
        )

    def resume(self, answer: Any) -> bool:
        from hitl_client.pydantic_ai import report_outcomes
        from pydantic_ai import ToolApproved
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        history = ModelMessagesTypeAdapter.validate_json(self.run.kept("messages.json"))
        resumed = self.agent.run_sync(message_history=history, deferred_tool_results=answer)
        report_outcomes(self.hitl, answer, resumed.new_messages())
        return all(isinstance(each, ToolApproved) for each in answer.approvals.values())


# --- the run --------------------------------------------------------------------------------------------


def run_agent(make: Callable[[Run], Agent], run: Run) -> int:
    """Pause (unless an earlier process did), file, wait, claim, resume: each step marked as it is reached."""
    agent = make(run)
    if not run.paused:
        agent.pause()
        run.step("paused")
    try:
        answer = agent.decide(wait=False)
        if answer is None:
            run.step("filed")
            answer = agent.decide(wait=True)
        approved = agent.resume(answer)  # the approval is claimed on the way (the step ``claimed``)
    except OutcomeUnknown:
        return REFUSED_OUTCOME_UNKNOWN
    except AlreadyClaimed:
        return REFUSED_ALREADY_CLAIMED
    run.step("done")
    return 0 if approved else NOT_APPROVED


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", required=True, choices=FRAMEWORKS)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--target-url", required=True)
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--stop-after", choices=STEPS, default=None, help="wait there to be killed")
    args = parser.parse_args()
    token = os.environ["HITL_AGENT_TOKEN"]  # never on the command line, where ps shows it
    args.state_dir.mkdir(parents=True, exist_ok=True)
    run = Run(args.state_dir, args.stop_after, args.target_url)
    with HitlClient(args.base_url, token, agent="refund-bot") as hitl:
        if args.framework == "openai-agents":
            return run_agent(lambda run: OpenAIAgentsAgent(run, hitl, args.run_id), run)
        if args.framework == "pydantic-ai":
            return run_agent(lambda run: PydanticAIAgent(run, hitl, args.run_id), run)
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(os.environ["HITL_CHECKPOINT_DSN"]) as saver:
            saver.setup()
            return run_agent(lambda run: LangGraphAgent(run, hitl, args.run_id, saver), run)


if __name__ == "__main__":
    raise SystemExit(main())
