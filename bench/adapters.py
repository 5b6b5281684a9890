#!/usr/bin/env python
"""The framework adapters of the Python client against the live stack: what a gated tool call adds to
an agent's run, beside the same run with the tool ungated (which never reaches the service).

Starts the stack of the other benches (bench/_stack.py: uvicorn with one worker, pool on, database --db,
no q-cluster) and runs each framework's example agent (clients/python/examples: a scripted model that
asks for one refund, then answers: LangGraph, Pydantic AI, the OpenAI Agents SDK) --runs times, one run at a time, with the 1-minute load average
beside each figure:

- **ungated**: the agent with its refund tool not gated: model → tool → model;
- **gated**: the example's own loop: the run pauses on the tool (the framework's interrupt), the adapter
  files the approval request, a scripted reviewer approves it the moment it is filed (handed over in
  process), the adapter claims it and resumes the run, the tool runs, the outcome is reported.

The difference is what the service adds to a gated call, the human's time left out.

    .venv/bin/python bench/adapters.py                # 50 runs of each, ~1 min
    .venv/bin/python bench/adapters.py --runs 10      # quick

It exits 1 unless every gated run ran its tool once and reported it ``succeeded``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import queue
import sys
import threading
import time
import uuid
from collections.abc import Callable
from types import ModuleType
from typing import Any

from _figures import format_latency, machine_line
from _service_accounts import load, service_account_tokens
from _stack import ROOT, Stack, add_stack_args
from hitl_client import AsyncHitlClient, HitlClient
from python_client import reviewer, setup_django

EXAMPLES = ROOT / "clients" / "python" / "examples"


def example(name: str) -> ModuleType:
    """An example script of the client, loaded as a module (its agent, model and tools are reused)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None  # nosec B101  # the file is part of this checkout
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class HandingClient(HitlClient):
    """The client, handing each request it files to the scripted reviewer."""

    def __init__(self, *args: Any, filed: queue.Queue[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.filed = filed

    def request_approval(self, **kwargs: Any) -> Any:
        found = super().request_approval(**kwargs)
        self.filed.put(found.id)
        return found


class AsyncHandingClient(AsyncHitlClient):
    """The async client, handing each request it files to the scripted reviewer."""

    def __init__(self, *args: Any, filed: queue.Queue[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.filed = filed

    async def request_approval(self, **kwargs: Any) -> Any:
        found = await super().request_approval(**kwargs)
        self.filed.put(found.id)
        return found


def timed(runs: int, run: Callable[[], Any]) -> tuple[list[float], float, float]:
    before = load()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        samples.append(time.perf_counter() - started)
    return samples, before, load()


def figure(label: str, measured: tuple[list[float], float, float]) -> None:
    samples, before, after = measured
    print(f"{format_latency(label, samples)}  [load {before:.2f} -> {after:.2f}]", flush=True)


def langgraph_runs(hitl: HitlClient) -> tuple[Callable[[], Any], Callable[[], Any]]:
    lg = example("langgraph_refund")
    from hitl_client.langgraph import ClaimApprovedCalls, decisions_for
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    ask = {"messages": [{"role": "user", "content": "Refund 250 EUR on order A-1"}]}

    def ungated() -> None:
        agent = create_agent(lg.model(), [lg.refund], checkpointer=InMemorySaver())
        agent.invoke(ask, {"configurable": {"thread_id": str(uuid.uuid4())}})

    def gated() -> None:
        gate = HumanInTheLoopMiddleware({"refund": True})
        middleware = [gate, ClaimApprovedCalls(hitl, gate)]
        agent = create_agent(lg.model(), [lg.refund], middleware=middleware, checkpointer=InMemorySaver())
        thread = str(uuid.uuid4())
        config = {"configurable": {"thread_id": thread}}
        result = agent.invoke(ask, config, version="v2")
        while result.interrupts:
            paused = result.value["messages"]
            resume = decisions_for(hitl, result.interrupts[0], run_id=thread, messages=paused, timeout=30)
            result = agent.invoke(Command(resume=resume), config, version="v2")

    return ungated, gated


def openai_agents_runs(hitl: AsyncHitlClient) -> tuple[Callable[[], Any], Callable[[], Any]]:
    oa = example("openai_agents_refund")
    from agents import Agent, Runner, function_tool
    from hitl_client.openai_agents import apply_decisions_async, report_outcomes_async

    @function_tool
    async def refund(order_id: str, amount: int) -> str:
        """Refund ``amount`` euros on the order ``order_id``."""
        return f"refunded {amount} EUR on {order_id}"

    plain = Agent(name="refund-bot", instructions="Refund A-1.", tools=[refund], model=oa.ScriptedModel())
    gated_agent = oa.agent()
    loop = asyncio.new_event_loop()

    def ungated() -> None:
        loop.run_until_complete(Runner.run(plain, "Refund order A-1."))

    async def gated_run() -> None:
        run_id = str(uuid.uuid4())
        result = await Runner.run(gated_agent, "Refund order A-1.")
        while result.interruptions:
            state = result.to_state()
            decisions = await apply_decisions_async(
                hitl, state, result.interruptions, run_id=run_id, reason="bench"
            )
            result = await Runner.run(gated_agent, state)
            await report_outcomes_async(hitl, result, decisions)

    def gated() -> None:
        loop.run_until_complete(gated_run())

    return ungated, gated


def pydantic_ai_runs(hitl: HitlClient) -> tuple[Callable[[], Any], Callable[[], Any]]:
    pa = example("pydantic_ai_refund")
    from hitl_client.pydantic_ai import report_outcomes, results_for
    from pydantic_ai import Agent, DeferredToolRequests

    def agent(gated: bool) -> Any:
        built = Agent(pa.model(), output_type=[str, DeferredToolRequests])

        @built.tool_plain(requires_approval=gated)
        def refund(order_id: str, amount: int) -> str:
            """Refund an order (in EUR)."""
            return f"refunded {amount} EUR on order {order_id}"

        return built

    plain, gated_agent = agent(False), agent(True)

    def ungated() -> None:
        plain.run_sync(pa.PROMPT)

    def gated() -> None:
        paused = gated_agent.run_sync(pa.PROMPT)
        results = results_for(hitl, paused.output, run_id=str(uuid.uuid4()), reason="bench", timeout=30)
        resumed = gated_agent.run_sync(message_history=paused.all_messages(), deferred_tool_results=results)
        report_outcomes(hitl, results, resumed.new_messages())

    return ungated, gated


def succeeded(account: str) -> int:
    """How many of ``account``'s approval requests were claimed and reported ``succeeded``."""
    from approval_requests.models import ApprovalRequest  # local import: needs Django set up

    return ApprovalRequest.objects.filter(account__username=account, outcome_status="succeeded").count()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=50, help="timed runs of each (default 50)")
    add_stack_args(parser)
    args = parser.parse_args()
    args.qcluster = False
    print(machine_line())
    setup_django(args.db)
    with Stack.from_args(args) as stack:
        print(f"{stack.describe_server()}, pool on, database {stack.db}")
        [token] = service_account_tokens("bench-adapter-agent", 1)
        done_before = succeeded("bench-adapter-agent-01")
        filed: queue.Queue[str] = queue.Queue()
        stop = threading.Event()
        thread = reviewer(stack.url, stack.tokens["approver"], filed, stop)
        with HandingClient(stack.url, token, agent="bench", filed=filed) as hitl:
            ungated, gated = langgraph_runs(hitl)
            ungated(), gated()  # warm up
            figure("LangGraph, ungated tool", timed(args.runs, ungated))
            figure("LangGraph, gated tool (approved at once)", timed(args.runs, gated))
            ungated, gated = pydantic_ai_runs(hitl)
            ungated(), gated()
            figure("Pydantic AI, ungated tool", timed(args.runs, ungated))
            figure("Pydantic AI, gated tool (approved at once)", timed(args.runs, gated))
        async_hitl = AsyncHandingClient(stack.url, token, agent="bench", filed=filed)
        ungated, gated = openai_agents_runs(async_hitl)
        ungated(), gated()
        figure("OpenAI Agents SDK, ungated tool", timed(args.runs, ungated))
        figure("OpenAI Agents SDK, gated tool (approved at once)", timed(args.runs, gated))
        stop.set()
        thread.join(5)
        done = succeeded("bench-adapter-agent-01") - done_before
    expected = 3 * (args.runs + 1)  # each framework's gated runs and its warm-up run
    errors = int(done != expected)
    if errors:
        print(f"errors: {done} gated calls ran and were reported succeeded, of {expected}")
    print(f"\nerrors in all: {errors}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
