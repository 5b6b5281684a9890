"""The OpenAI Agents SDK adapter (``pip install hitl-client[openai-agents]``, tested with 0.20).

A tool declared with ``function_tool(needs_approval=True)`` pauses the run: ``Runner.run`` returns a
result whose ``interruptions`` are ``ToolApprovalItem``s and ``result.to_state()`` is the ``RunState``
to resume (``to_string()`` / ``RunState.from_string(agent, text)`` carry it to another process).
``apply_decisions`` files one approval request per interruption, waits, and applies each decision to
the state; ``Runner.run(agent, state)`` then continues, and ``report_outcomes`` tells the service what
the approved tools did.

Rules:
- One request per tool call: the idempotency key is the run id and the tool call id, so a serialized
  state resumed anywhere finds its requests and files nothing twice.
- Approved: the approval is claimed (the one execution it grants) before ``state.approve``; a state
  resumed again meets ``AlreadyClaimed`` (the outcome was reported) or ``OutcomeUnknown`` (it was not:
  the tool may have run) and nothing is approved, so the tool does not run twice.
- No edits: the SDK runs an approved tool with the model's own arguments (0.20 has no way to replace
  them), so requests are filed with ``allowEdit: false`` and a reviewer approves or rejects as is.
- Not approved: ``state.reject`` with a message the model reads as the tool's result: the reviewer's
  guidance (an instruction instead of an approval) or note, else why it ended (rejected, a timeout,
  cancelled). The tool does not run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents import RunState, ToolApprovalItem, ToolCallOutputItem

from hitl_client.async_client import AsyncHitlClient
from hitl_client.client import HitlClient
from hitl_client.models import APPROVED, CANCELLED, EXPIRED, ApprovalRequest

NO_EDITS = {"allowEdit": False}
SUMMARY_MAX = 1000


@dataclass
class Decisions:
    """What ``apply_decisions`` did: truthy once every interruption was decided and applied to the
    state, falsy while any is pending (``wait=False``; the state is untouched then). ``claimed`` maps
    each approved tool call id to its approval request, for ``report_outcomes``."""

    decided: bool
    requests: dict[str, ApprovalRequest] = field(default_factory=dict)
    claimed: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.decided


def _call_id(item: ToolApprovalItem) -> str:
    call_id = item.call_id
    if not call_id:
        raise ValueError(f"the interruption of tool {item.name!r} has no call id to file it under")
    return str(call_id)


def _filing(
    item: ToolApprovalItem, run_id: str, reason: str | None, hitl_config: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The approval request of one interruption: the tool's name and the model's arguments."""
    name = item.qualified_name or item.name or "tool"
    try:
        arguments = json.loads(item.arguments or "{}")
    except ValueError:
        arguments = {"arguments": item.arguments}
    if not isinstance(arguments, dict):
        arguments = {"arguments": arguments}
    return {
        "run_id": run_id,
        "call_id": _call_id(item),
        "action": name,
        "arguments": arguments,
        "reason": reason or f"The agent calls {name}",
        "hitl_config": {**(hitl_config or {}), **NO_EDITS},
    }


def rejection_message(found: ApprovalRequest) -> str:
    """What the model reads instead of the tool's result when the call was not approved."""
    decision = found.decision
    if found.status == CANCELLED:
        return "The approval request was withdrawn; this call did not run."
    if found.status == EXPIRED:
        return "Nobody decided this call in time; it did not run."
    if decision is not None and decision.guidance:
        return decision.guidance
    if decision is not None and decision.automated:
        return "This call was rejected: nobody approved it in time."
    if decision is not None and decision.note:
        return f"A reviewer rejected this call: {decision.note}"
    return f"This call was not approved ({found.status.lower()}); it did not run."


def _apply(
    state: RunState[Any, Any],
    items: list[ToolApprovalItem],
    found: dict[str, ApprovalRequest],
) -> None:
    """Approve or reject each call in ``state``; called only once every approval was claimed."""
    for item in items:
        answer = found[_call_id(item)]
        if answer.status == APPROVED:
            state.approve(item)
        else:
            state.reject(item, rejection_message=rejection_message(answer))


def _not_run(error: Exception) -> str:
    return f"not run: another call of the same turn could not be claimed ({type(error).__name__})"


def apply_decisions(
    client: HitlClient,
    state: RunState[Any, Any],
    interruptions: Iterable[ToolApprovalItem],
    *,
    run_id: str,
    wait: bool = True,
    timeout: float | None = None,
    reason: str | None = None,
    hitl_config: Mapping[str, Any] | None = None,
    **filing: Any,
) -> Decisions:
    """File an approval request for each interruption (once per run and tool call id), wait for the
    decisions (``timeout``: ``WaitTimeout`` past it; ``wait=False``: return a falsy ``Decisions`` while
    any is pending), claim each approval, then approve or reject each call in ``state``.

    Raises ``AlreadyClaimed``/``OutcomeUnknown`` when a call was approved and claimed before (this state
    was resumed already): the state is left as it was, so nothing runs twice. ``filing``: the other
    arguments of ``request_approval`` (``on_behalf_of``, ``context``, ``callback_url``)."""
    items = list(interruptions)
    found: dict[str, ApprovalRequest] = {}
    for item in items:
        filed = client.request_approval(**_filing(item, run_id, reason, hitl_config), **filing)
        found[_call_id(item)] = filed
    if not wait and any(answer.pending for answer in found.values()):
        return Decisions(False, found)
    for call_id, answer in found.items():
        if answer.pending:
            found[call_id] = client.wait(answer.id, timeout=timeout)
    claimed: dict[str, str] = {}
    try:
        for call_id, answer in found.items():
            if answer.status == APPROVED:
                client.claim(answer.id)
                claimed[call_id] = answer.id
    except Exception as error:
        for request_id in claimed.values():
            client.report_outcome(request_id, status="failed", summary=_not_run(error))
        raise
    _apply(state, items, found)
    return Decisions(True, found, claimed)


async def apply_decisions_async(
    client: AsyncHitlClient,
    state: RunState[Any, Any],
    interruptions: Iterable[ToolApprovalItem],
    *,
    run_id: str,
    wait: bool = True,
    timeout: float | None = None,
    reason: str | None = None,
    hitl_config: Mapping[str, Any] | None = None,
    **filing: Any,
) -> Decisions:
    """``apply_decisions`` with an ``AsyncHitlClient``, awaited."""
    items = list(interruptions)
    found: dict[str, ApprovalRequest] = {}
    for item in items:
        filed = await client.request_approval(**_filing(item, run_id, reason, hitl_config), **filing)
        found[_call_id(item)] = filed
    if not wait and any(answer.pending for answer in found.values()):
        return Decisions(False, found)
    for call_id, answer in found.items():
        if answer.pending:
            found[call_id] = await client.wait(answer.id, timeout=timeout)
    claimed: dict[str, str] = {}
    try:
        for call_id, answer in found.items():
            if answer.status == APPROVED:
                await client.claim(answer.id)
                claimed[call_id] = answer.id
    except Exception as error:
        for request_id in claimed.values():
            await client.report_outcome(request_id, status="failed", summary=_not_run(error))
        raise
    _apply(state, items, found)
    return Decisions(True, found, claimed)


def _outcomes(result: Any, decisions: Decisions) -> list[tuple[str, str, str]]:
    """(request id, status, summary) of each claimed call: ``succeeded`` with the tool's output when the
    resumed run holds it, ``failed`` when the run ended without one."""
    outputs = {item.call_id: item.output for item in result.new_items if isinstance(item, ToolCallOutputItem)}
    answers = []
    for call_id, request_id in decisions.claimed.items():
        if call_id in outputs:
            answers.append((request_id, "succeeded", str(outputs[call_id])[:SUMMARY_MAX]))
        else:
            answers.append((request_id, "failed", "the resumed run produced no output for this call"))
    return answers


def report_outcomes(client: HitlClient, result: Any, decisions: Decisions) -> None:
    """Report what each approved tool did, from the result of ``Runner.run(agent, state)``. A run that
    died before this leaves the outcome unknown: a later resume gets ``OutcomeUnknown``, never a rerun."""
    for request_id, status, summary in _outcomes(result, decisions):
        client.report_outcome(request_id, status=status, summary=summary)


async def report_outcomes_async(client: AsyncHitlClient, result: Any, decisions: Decisions) -> None:
    """``report_outcomes`` with an ``AsyncHitlClient``, awaited."""
    for request_id, status, summary in _outcomes(result, decisions):
        await client.report_outcome(request_id, status=status, summary=summary)
