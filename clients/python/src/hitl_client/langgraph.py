"""LangGraph / LangChain: the reviewer of a ``HumanInTheLoopMiddleware`` pause is the HITL service.

The agent pauses as LangGraph pauses (an ``interrupt`` saved by its checkpointer); ``decisions_for``
files one approval request per gated tool call of the interrupt, waits for the decisions and returns the
value to resume with (``Command(resume=...)``). ``ClaimApprovedCalls``, a middleware listed after
``HumanInTheLoopMiddleware``, guards each gated tool where it runs. Rules:

- One request per gated tool call: the idempotency key is the run (the thread id) and the call's id
  (``tool-call:<id>``), so a resumed or retried run files nothing twice and finds the decisions already
  taken. A batched interrupt does not carry the ids: pass the graph's ``messages`` (the paused state's),
  whose last AI message holds the calls.
- Approved: ``approve``; approved with a reviewer's edit: ``edit`` with the approved arguments.
  Rejected: ``reject`` with the reviewer's note; a reply with guidance: ``respond`` with it (the model
  reads it as the tool's answer) when the tool allows ``respond``, else ``reject`` with it; cancelled or
  expired: ``reject`` saying so. ``wait=False`` files and returns None while any call is pending: the
  graph stays paused in its checkpointer and the caller resumes later.
- At most once, where the tool runs: before a gated call runs, ``ClaimApprovedCalls`` finds its request,
  claims it (the one execution the approval grants) and checks that the call about to run is the one
  approved (its name and arguments, a reviewer's edit applied). Then the tool runs and the outcome is
  reported: ``succeeded``, or ``failed`` when the tool raised or answered with an error. A gated call
  with no approval (none filed, not approved, or another call than the one approved) raises
  ``NotGranted``; one claimed before raises ``AlreadyClaimed`` (``OutcomeUnknown`` when the first run
  never reported): the same interrupt resumed twice, or LangGraph running the tools node again after the
  process died in it, never runs an approved call a second time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.types import Command, Interrupt

from hitl_client import wire
from hitl_client.async_client import AsyncHitlClient
from hitl_client.client import HitlClient
from hitl_client.models import APPROVED, CANCELLED, EXPIRED, REJECTED, ApprovalRequest, Grant

__all__ = ["ClaimApprovedCalls", "NotGranted", "adecisions_for", "decisions_for"]

REASON_MAX = 500
SUMMARY_MAX = 1000


class NotGranted(Exception):
    """A gated tool call with no approval to run it: none was filed for it, it was not approved, or the
    call about to run is not the one approved. The tool did not run."""


def _call_id(tool_call_id: Any) -> str:
    if not isinstance(tool_call_id, str) or not tool_call_id:
        raise ValueError("a gated tool call needs an id: make sure the chat model returns tool call ids")
    return f"tool-call:{tool_call_id}"


# --- what the interrupt asks ------------------------------------------------------------------------


class _Action:
    """One gated call of an interrupt to file: its call id, tool name, arguments, reason and allowed
    decisions."""

    def __init__(self, call_id: str, request: Mapping[str, Any], allowed: Sequence[str]) -> None:
        self.call_id = call_id
        self.name = str(request["name"])
        self.args = dict(request.get("args") or {})
        description = str(request.get("description") or "").strip()
        self.reason = (description or f"Run the tool {self.name}")[:REASON_MAX]
        self.allowed = tuple(allowed)

    def filing(self, filing: Mapping[str, Any]) -> dict[str, Any]:
        """The keywords of ``request_approval``: ``filing`` (the caller's) with this action's; a reviewer
        may edit only what the middleware lets the graph run edited."""
        config = dict(filing.get("hitl_config") or {})
        config["allowEdit"] = "edit" in self.allowed and bool(config.get("allowEdit", True))
        return {
            **filing,
            "call_id": self.call_id,
            "action": self.name,
            "arguments": self.args,
            "reason": self.reason,
            "hitl_config": config,
        }


def _paused_calls(messages: Sequence[BaseMessage] | None) -> list[Mapping[str, Any]]:
    last = next((message for message in reversed(messages or ()) if isinstance(message, AIMessage)), None)
    if last is None or not last.tool_calls:
        raise ValueError(
            "a batched interrupt does not carry the tool call ids: pass messages=, the paused graph's "
            "messages (agent.get_state(config).values['messages'], or the result's value['messages'])"
        )
    return list(last.tool_calls)


def _call_ids(requests: Sequence[Mapping[str, Any]], messages: Sequence[BaseMessage] | None) -> list[str]:
    """The id of the tool call behind each action request: the paused AI message's calls, in order, as
    the middleware made one request of each gated call."""
    calls = iter(_paused_calls(messages))
    ids: list[str] = []
    for request in requests:
        wanted = (request["name"], wire.canonical_json(request.get("args") or {}))
        call = next(
            (call for call in calls if (call["name"], wire.canonical_json(call["args"])) == wanted), None
        )
        if call is None:
            raise ValueError(
                f"the messages hold no tool call for the action {request['name']!r} of the interrupt"
            )
        ids.append(_call_id(call.get("id")))
    if len(set(ids)) != len(ids):
        raise ValueError("two tool calls of the interrupt share an id: each call needs its own")
    return ids


def _actions(
    interrupt: Interrupt | Mapping[str, Any], messages: Sequence[BaseMessage] | None
) -> tuple[list[_Action], bool]:
    """The interrupt's actions, and whether it is a ``per_call`` interrupt (one action, one decision)."""
    value = interrupt.value if isinstance(interrupt, Interrupt) else interrupt
    if not isinstance(value, Mapping):
        raise ValueError("not a HumanInTheLoopMiddleware interrupt: its value is not a mapping")
    if value.get("type") == "tool_approval":
        return [_Action(_call_id(value.get("tool_call_id")), value, _ALL)], True
    if "action_requests" not in value:
        raise ValueError("not a HumanInTheLoopMiddleware interrupt: no action_requests")
    requests = value["action_requests"]
    allowed = {
        config["action_name"]: config["allowed_decisions"] for config in value.get("review_configs", ())
    }
    return [
        _Action(call_id, request, allowed.get(request["name"], _ALL))
        for call_id, request in zip(_call_ids(requests, messages), requests, strict=True)
    ], False


_ALL = ("approve", "edit", "reject", "respond")


# --- what the answer resumes with ---------------------------------------------------------------------


def _decision(action: _Action, decided: ApprovalRequest) -> dict[str, Any]:
    """The decision of one action: ``approve`` or ``edit`` (the approved arguments, when a reviewer
    changed them) for an approval; else the refusal, with why."""
    decision = decided.decision
    if decided.status == APPROVED:
        approved = decided.grant.arguments if decided.grant is not None else action.args
        if approved == action.args:
            return {"type": "approve"}
        return {"type": "edit", "edited_action": {"name": action.name, "args": approved}}
    if decided.status == REJECTED and decision is not None and decision.guidance:
        kind = "respond" if "respond" in action.allowed else "reject"
        return {"type": kind, "message": decision.guidance}
    if decided.status == REJECTED:
        note = decision.note if decision is not None else ""
        return {"type": "reject", "message": note} if note else {"type": "reject"}
    if decided.status == CANCELLED:
        return {"type": "reject", "message": "The approval request was withdrawn."}
    if decided.status == EXPIRED:
        return {"type": "reject", "message": "The approval request expired without a decision."}
    raise ValueError(f"approval request {decided.id} ended as {decided.status}")


def _resume(actions: list[_Action], decided: list[ApprovalRequest], per_call: bool) -> Any:
    decisions = [_decision(action, found) for action, found in zip(actions, decided, strict=True)]
    return decisions[0] if per_call else {"decisions": decisions}


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


# --- the sync and async entry points --------------------------------------------------------------


def decisions_for(
    client: HitlClient,
    interrupt: Interrupt | Mapping[str, Any],
    *,
    run_id: str,
    messages: Sequence[BaseMessage] | None = None,
    wait: bool = True,
    timeout: float | None = None,
    **filing: Any,
) -> Any:
    """The value to resume a ``HumanInTheLoopMiddleware`` interrupt with, as the service's reviewers
    decided: ``{"decisions": [...]}`` (a ``per_call`` interrupt: the one decision).

    ``interrupt`` is the ``Interrupt`` the graph returned (or its value); ``run_id`` the thread id;
    ``messages`` the paused graph's messages (a batched interrupt's tool call ids are there). Files one
    request per gated call (``filing``: ``on_behalf_of``, ``context``, ``callback_url``,
    ``hitl_config``), waits for each (``timeout`` in seconds for all: ``WaitTimeout``). ``wait=False``:
    None while any is pending. Nothing is claimed here: ``ClaimApprovedCalls`` claims each approved call
    as it runs."""
    actions, per_call = _actions(interrupt, messages)
    filed = [client.request_approval(run_id=run_id, **action.filing(filing)) for action in actions]
    if not wait and any(item.pending for item in filed):
        return None
    deadline = _deadline(timeout)
    decided = [client.wait(item.id, timeout=_left(deadline)) if item.pending else item for item in filed]
    return _resume(actions, decided, per_call)


async def adecisions_for(
    client: AsyncHitlClient,
    interrupt: Interrupt | Mapping[str, Any],
    *,
    run_id: str,
    messages: Sequence[BaseMessage] | None = None,
    wait: bool = True,
    timeout: float | None = None,
    **filing: Any,
) -> Any:
    """``decisions_for`` with the ``AsyncHitlClient`` (the same rules), for ``ainvoke``."""
    actions, per_call = _actions(interrupt, messages)
    filed = [await client.request_approval(run_id=run_id, **action.filing(filing)) for action in actions]
    if not wait and any(item.pending for item in filed):
        return None
    deadline = _deadline(timeout)
    decided = [
        await client.wait(item.id, timeout=_left(deadline)) if item.pending else item for item in filed
    ]
    return _resume(actions, decided, per_call)


# --- where the gated tool runs ------------------------------------------------------------------------


def _thread_id(request: ToolCallRequest) -> str | None:
    config = getattr(request.runtime, "config", None) or {}
    thread = (config.get("configurable") or {}).get("thread_id")
    return None if thread is None else str(thread)


def _status(result: ToolMessage | Command[Any]) -> tuple[str, str]:
    if isinstance(result, ToolMessage) and result.status == "error":
        return "failed", str(result.content)[:SUMMARY_MAX]
    return "succeeded", ""


def _granted(found: ApprovalRequest | None, call: Mapping[str, Any]) -> ApprovalRequest:
    """``found`` if it approves a call: else ``NotGranted``, saying why."""
    if found is None:
        raise NotGranted(f"no approval request was filed for the tool call {call.get('id')!r}")
    if found.status != APPROVED:
        raise NotGranted(f"approval request {found.id} is {found.status}: the tool call does not run")
    return found


def _differs(found: ApprovalRequest, grant: Grant, call: Mapping[str, Any]) -> str | None:
    """Why the call about to run is not the one approved (None: it is)."""
    approved_name = (found.raw.get("action") or {}).get("name")
    if approved_name != call["name"]:
        return f"not run: the approval is for {approved_name!r}, the call is to {call['name']!r}"
    if wire.canonical_json(grant.arguments) != wire.canonical_json(call.get("args") or {}):
        return "not run: the call's arguments are not the ones approved"
    return None


class ClaimApprovedCalls(AgentMiddleware):
    """Runs a gated tool call only with its approval, at most once, and reports what it did (see the
    module's rules). ``gate`` is the agent's ``HumanInTheLoopMiddleware`` (its ``interrupt_on`` says
    which calls are gated); list this middleware after it, so it sees each call as approved (a reviewer's
    edit applied). ``run_id``: the run a call belongs to (default: its ``thread_id``, as given to
    ``decisions_for``). Calls that are not gated run untouched."""

    def __init__(
        self,
        client: HitlClient | AsyncHitlClient,
        gate: HumanInTheLoopMiddleware,
        *,
        run_id: Callable[[ToolCallRequest], str | None] = _thread_id,
    ) -> None:
        super().__init__()
        self.client = client
        self.gate = gate
        self.run_id = run_id

    def _gated(self, request: ToolCallRequest) -> bool:
        config = self.gate.interrupt_on.get(request.tool_call["name"])
        if config is None:
            return False
        when = config.get("when")
        return when is None or bool(when(request))

    def _key(self, request: ToolCallRequest) -> tuple[str, str]:
        run_id = self.run_id(request)
        if not run_id:
            raise NotGranted("the tool call's run is unknown (no thread_id): its approval cannot be found")
        return run_id, _call_id(request.tool_call.get("id"))

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        if not self._gated(request):
            return handler(request)
        if not isinstance(self.client, HitlClient):
            raise TypeError("ClaimApprovedCalls with an AsyncHitlClient runs from ainvoke only")
        run_id, call_id = self._key(request)
        found = _granted(self.client.find(run_id=run_id, call_id=call_id), request.tool_call)
        grant = self.client.claim(found.id)
        if (why := _differs(found, grant, request.tool_call)) is not None:
            self.client.report_outcome(found.id, status="failed", summary=why)
            raise NotGranted(why)
        try:
            result = handler(request)
        except Exception as exc:
            self.client.report_outcome(found.id, status="failed", summary=f"{type(exc).__name__}: {exc}")
            raise
        status, summary = _status(result)
        self.client.report_outcome(found.id, status=status, summary=summary)
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        if not self._gated(request):
            return await handler(request)
        run_id, call_id = self._key(request)
        found = _granted(
            await self._call(self.client.find, run_id=run_id, call_id=call_id), request.tool_call
        )
        grant = await self._call(self.client.claim, found.id)
        if (why := _differs(found, grant, request.tool_call)) is not None:
            await self._call(self.client.report_outcome, found.id, status="failed", summary=why)
            raise NotGranted(why)
        try:
            result = await handler(request)
        except Exception as exc:
            summary = f"{type(exc).__name__}: {exc}"
            await self._call(self.client.report_outcome, found.id, status="failed", summary=summary)
            raise
        status, summary = _status(result)
        await self._call(self.client.report_outcome, found.id, status=status, summary=summary)
        return result

    async def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A client method, awaited: the async client's directly, the sync one's in a thread."""
        if isinstance(self.client, AsyncHitlClient):
            return await method(*args, **kwargs)
        return await asyncio.to_thread(method, *args, **kwargs)
