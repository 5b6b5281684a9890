"""LangGraph / LangChain: the reviewer of a ``HumanInTheLoopMiddleware`` pause is the HITL service.

The agent pauses as LangGraph pauses (an ``interrupt`` saved by its checkpointer); ``decisions_for``
files one approval request per action of the interrupt, waits for the decisions and returns the value
to resume with (``Command(resume=...)``). Rules:

- One request per action: the idempotency key is the run (the thread id), the interrupt's id and the
  action's position in it (its tool call id for a ``per_call`` interrupt), so a resumed or retried
  run files nothing twice and finds the decisions already taken.
- Approved: the approval is claimed before the decision is returned (the claim is the one execution
  the approval grants), so the same interrupt never yields a second ``approve``: a second resume
  raises ``AlreadyClaimed`` (or ``OutcomeUnknown`` when the first run never reported) and the tool
  does not run. A reviewer's edit becomes an ``edit`` decision with the approved arguments.
- Rejected: ``reject`` with the reviewer's note; a reply with guidance: ``respond`` with it (the
  model reads it as the tool's answer) when the tool allows ``respond``, else ``reject`` with it;
  cancelled or expired: ``reject`` saying so.
- ``wait=False`` files and returns None while any action is pending: the graph stays paused in its
  checkpointer and the caller resumes later.
- The outcome: ``ReportOutcomes`` (a middleware listed after ``HumanInTheLoopMiddleware``) reports
  ``succeeded`` or ``failed`` once the approved tool ran, when it runs in the process that claimed it
  (the usual case: the same call resumes the graph). Otherwise it stays unreported, and the service
  answers a later claim with ``OutcomeUnknown``: never a second run.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command, Interrupt

from hitl_client import wire
from hitl_client.async_client import AsyncHitlClient
from hitl_client.client import HitlClient
from hitl_client.errors import AlreadyClaimed, OutcomeUnknown
from hitl_client.models import APPROVED, CANCELLED, EXPIRED, REJECTED, ApprovalRequest

__all__ = ["ReportOutcomes", "adecisions_for", "decisions_for"]

REASON_MAX = 500
NOT_RUN = "not run: another action of the same interrupt could not be claimed"


# --- what the interrupt asks ------------------------------------------------------------------------


class _Action:
    """One action of an interrupt to file: its call id, tool name, arguments, reason and allowed
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


def _actions(
    interrupt: Interrupt | Mapping[str, Any], interrupt_id: str | None
) -> tuple[list[_Action], bool]:
    """The interrupt's actions, and whether it is a ``per_call`` interrupt (one action, one decision)."""
    value = interrupt.value if isinstance(interrupt, Interrupt) else interrupt
    ident = interrupt.id if isinstance(interrupt, Interrupt) else interrupt_id
    if not isinstance(value, Mapping):
        raise ValueError("not a HumanInTheLoopMiddleware interrupt: its value is not a mapping")
    if value.get("type") == "tool_approval":
        return [_Action(f"tool-call:{value['tool_call_id']}", value, _ALL)], True
    if "action_requests" not in value:
        raise ValueError("not a HumanInTheLoopMiddleware interrupt: no action_requests")
    if not ident:
        raise ValueError("pass the Interrupt (or its id as interrupt_id): the key of each action needs it")
    allowed = {
        config["action_name"]: config["allowed_decisions"] for config in value.get("review_configs", ())
    }
    return [
        _Action(f"interrupt:{ident}:{index}", request, allowed.get(request["name"], _ALL))
        for index, request in enumerate(value["action_requests"])
    ], False


_ALL = ("approve", "edit", "reject", "respond")


# --- what the answer resumes with ---------------------------------------------------------------------


def _refusal(action: _Action, decided: ApprovalRequest) -> dict[str, Any]:
    """The decision for a request that ended without an approval."""
    decision = decided.decision
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


def _approval(action: _Action, arguments: dict[str, Any]) -> dict[str, Any]:
    """The decision for a claimed approval: ``approve``, or ``edit`` with the approved arguments when a
    reviewer changed them."""
    if arguments == action.args:
        return {"type": "approve"}
    return {"type": "edit", "edited_action": {"name": action.name, "args": arguments}}


def _resume(decisions: list[dict[str, Any]], per_call: bool) -> Any:
    return decisions[0] if per_call else {"decisions": decisions}


# --- the claims made in this process, for ReportOutcomes -----------------------------------------------


class _Claims:
    """Approvals claimed in this process whose tool has not run yet, by (run, tool, arguments)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: dict[tuple[str, str, str], str] = {}

    def add(self, run_id: str, name: str, arguments: Mapping[str, Any], request_id: str) -> None:
        with self._lock:
            self._ids[(run_id, name, wire.canonical_json(arguments))] = request_id

    def take(self, run_id: str, name: str, arguments: Mapping[str, Any]) -> str | None:
        with self._lock:
            return self._ids.pop((run_id, name, wire.canonical_json(arguments)), None)


CLAIMS = _Claims()


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
    wait: bool = True,
    timeout: float | None = None,
    interrupt_id: str | None = None,
    **filing: Any,
) -> Any:
    """The value to resume a ``HumanInTheLoopMiddleware`` interrupt with, as the service's reviewers
    decided: ``{"decisions": [...]}`` (a ``per_call`` interrupt: the one decision).

    ``interrupt`` is the ``Interrupt`` the graph returned (or its value, with ``interrupt_id``);
    ``run_id`` the thread id. Files one request per action (``filing``: ``on_behalf_of``, ``context``,
    ``callback_url``), waits for each (``timeout`` in seconds for all: ``WaitTimeout``), claims each
    approval before returning it. ``wait=False``: None while any is pending. ``AlreadyClaimed`` or
    ``OutcomeUnknown``: the interrupt was resumed with an approval before, and must not run again."""
    actions, per_call = _actions(interrupt, interrupt_id)
    filed = [client.request_approval(run_id=run_id, **action.filing(filing)) for action in actions]
    if not wait and any(item.pending for item in filed):
        return None
    deadline = _deadline(timeout)
    decided = [client.wait(item.id, timeout=_left(deadline)) if item.pending else item for item in filed]
    decisions: list[dict[str, Any]] = []
    claimed: list[str] = []
    try:
        for action, found in zip(actions, decided, strict=True):
            if found.status != APPROVED:
                decisions.append(_refusal(action, found))
                continue
            grant = client.claim(found.id)
            claimed.append(found.id)
            CLAIMS.add(run_id, action.name, grant.arguments, found.id)
            decisions.append(_approval(action, grant.arguments))
    except (AlreadyClaimed, OutcomeUnknown):
        for request_id in claimed:
            client.report_outcome(request_id, status="failed", summary=NOT_RUN)
        raise
    return _resume(decisions, per_call)


async def adecisions_for(
    client: AsyncHitlClient,
    interrupt: Interrupt | Mapping[str, Any],
    *,
    run_id: str,
    wait: bool = True,
    timeout: float | None = None,
    interrupt_id: str | None = None,
    **filing: Any,
) -> Any:
    """``decisions_for`` with the ``AsyncHitlClient`` (the same rules), for ``ainvoke``."""
    actions, per_call = _actions(interrupt, interrupt_id)
    filed = [await client.request_approval(run_id=run_id, **action.filing(filing)) for action in actions]
    if not wait and any(item.pending for item in filed):
        return None
    deadline = _deadline(timeout)
    decided = [
        await client.wait(item.id, timeout=_left(deadline)) if item.pending else item for item in filed
    ]
    decisions: list[dict[str, Any]] = []
    claimed: list[str] = []
    try:
        for action, found in zip(actions, decided, strict=True):
            if found.status != APPROVED:
                decisions.append(_refusal(action, found))
                continue
            grant = await client.claim(found.id)
            claimed.append(found.id)
            CLAIMS.add(run_id, action.name, grant.arguments, found.id)
            decisions.append(_approval(action, grant.arguments))
    except (AlreadyClaimed, OutcomeUnknown):
        for request_id in claimed:
            await client.report_outcome(request_id, status="failed", summary=NOT_RUN)
        raise
    return _resume(decisions, per_call)


# --- the outcome, once the approved tool ran ------------------------------------------------------


def _thread_id(request: ToolCallRequest) -> str | None:
    config = getattr(request.runtime, "config", None) or {}
    thread = (config.get("configurable") or {}).get("thread_id")
    return None if thread is None else str(thread)


def _status(result: ToolMessage | Command[Any]) -> tuple[str, str]:
    if isinstance(result, ToolMessage) and result.status == "error":
        return "failed", str(result.content)[:1000]
    return "succeeded", ""


class ReportOutcomes(AgentMiddleware):
    """Reports what happened to each approved tool call this process claimed: ``succeeded``, or
    ``failed`` when the tool raised or answered with an error. List it after
    ``HumanInTheLoopMiddleware`` so it sees the call as approved (a reviewer's edit applied).
    ``run_id``: from the tool call's config (default: its ``thread_id``, as given to
    ``decisions_for``). A tool call nobody claimed here runs untouched."""

    def __init__(
        self,
        client: HitlClient | AsyncHitlClient,
        *,
        run_id: Callable[[ToolCallRequest], str | None] = _thread_id,
    ) -> None:
        super().__init__()
        self.client = client
        self.run_id = run_id

    def _claimed(self, request: ToolCallRequest) -> str | None:
        run_id = self.run_id(request)
        if run_id is None:
            return None
        call = request.tool_call
        return CLAIMS.take(run_id, call["name"], call.get("args") or {})

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        request_id = self._claimed(request)
        if request_id is None:
            return handler(request)
        if not isinstance(self.client, HitlClient):
            raise TypeError("ReportOutcomes with an AsyncHitlClient reports from ainvoke only")
        try:
            result = handler(request)
        except Exception as exc:
            self.client.report_outcome(request_id, status="failed", summary=f"{type(exc).__name__}: {exc}")
            raise
        status, summary = _status(result)
        self.client.report_outcome(request_id, status=status, summary=summary)
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        request_id = self._claimed(request)
        if request_id is None:
            return await handler(request)
        try:
            result = await handler(request)
        except Exception as exc:
            await self._report(request_id, "failed", f"{type(exc).__name__}: {exc}")
            raise
        await self._report(request_id, *_status(result))
        return result

    async def _report(self, request_id: str, status: str, summary: str) -> None:
        if isinstance(self.client, AsyncHitlClient):
            await self.client.report_outcome(request_id, status=status, summary=summary)
        else:
            await asyncio.to_thread(self.client.report_outcome, request_id, status=status, summary=summary)
