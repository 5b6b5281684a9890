"""Pydantic AI's deferred tools, answered by the HITL approval service (``pip install hitl-client[pydantic-ai]``).

An agent whose gated tools have ``requires_approval=True`` (or raise ``ApprovalRequired``) and whose
``output_type`` includes ``DeferredToolRequests`` ends its run with the calls it wants approved.
``results_for`` (``aresults_for``, awaited) files one approval request per call, waits for the reviewers
and answers them as ``DeferredToolResults`` for the resumed run (``message_history`` and
``deferred_tool_results``):

- approved: ``ToolApproved()``; approved with an edit: ``ToolApproved(override_args=...)``, the tool runs
  with the arguments as approved;
- rejected (by a reviewer or an ``AUTO_REJECT`` timeout), replied to with guidance, cancelled or expired:
  ``ToolDenied(message)``, the reviewer's guidance or note going back to the model; the tool does not run.

Rules:

- One request per call of one run: the idempotency key is ``run_id`` and the ``tool_call_id``, so a run
  resumed in another process (the message history kept) files nothing twice and finds the same decision.
- At most once: every approval is claimed before it is returned (the claim is the one execution the
  service grants). A second resume of the same call raises ``AlreadyClaimed`` (the first outcome was
  reported) or ``OutcomeUnknown`` (it may have run), and returns no results: the tool does not run again.
- The outcome: ``report_outcomes`` (``areport_outcomes``), called with the resumed run's new messages,
  reports ``succeeded`` for each approved call whose tool returned and ``failed`` for one that failed or
  asked the model to retry. A run that dies before reporting leaves the claim without an outcome:
  ``OutcomeUnknown`` for whoever tries again.
- ``wait=False`` files and returns ``None`` while any call is still pending (nothing claimed): keep the
  message history and call again later. ``timeout`` is the caller's own limit (``WaitTimeout``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.messages import ModelMessage, ModelRequest, RetryPromptPart, ToolCallPart, ToolReturnPart

from hitl_client.async_client import AsyncHitlClient
from hitl_client.client import HitlClient
from hitl_client.models import APPROVED, CANCELLED, EXPIRED, ApprovalRequest

METADATA_KEY = "hitlApprovalRequest"  # DeferredToolResults.metadata[tool_call_id][METADATA_KEY]: its id

Reason = str | Callable[[ToolCallPart], str]

__all__ = ["METADATA_KEY", "aresults_for", "areport_outcomes", "report_outcomes", "results_for"]


def _arguments(call: ToolCallPart) -> dict[str, Any]:
    return call.args_as_dict()


def _filing(call: ToolCallPart, run_id: str, reason: Reason, filing: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "call_id": call.tool_call_id,
        "action": call.tool_name,
        "reason": reason(call) if callable(reason) else reason,
        "arguments": _arguments(call),
        **filing,
    }


def _denial(decided: ApprovalRequest) -> ToolDenied:
    """What the model reads when the call was not approved: the reviewer's guidance, else their note; a
    timeout's rejection says so."""
    decision = decided.decision
    if decided.status == CANCELLED:
        return ToolDenied("The approval request was withdrawn; the tool call did not run.")
    if decided.status == EXPIRED:
        return ToolDenied("Nobody decided the approval request in time; the tool call did not run.")
    if decision is not None and decision.automated:
        return ToolDenied("Nobody decided the approval request in time; the tool call was rejected.")
    if decision is not None and decision.guidance:
        return ToolDenied(decision.guidance)
    if decision is not None and decision.note:
        return ToolDenied(f"The tool call was rejected: {decision.note}")
    return ToolDenied("The tool call was rejected.")


def _approval(decided: ApprovalRequest, arguments: dict[str, Any]) -> ToolApproved:
    """Approved as asked: ``ToolApproved()``; edited: the arguments as approved."""
    if decided.grant is not None and decided.grant.arguments != arguments:
        return ToolApproved(override_args=dict(decided.grant.arguments))
    return ToolApproved()


def _in_claim_order(
    calls: list[ToolCallPart], decided: list[ApprovalRequest]
) -> list[tuple[ToolCallPart, ApprovalRequest]]:
    """The calls with their decisions, those whose approval was claimed before first: their claim raises
    (``AlreadyClaimed``/``OutcomeUnknown``) before any other approval is claimed and then lost."""
    pairs = list(zip(calls, decided, strict=True))
    return sorted(pairs, key=lambda pair: not (pair[1].grant is not None and pair[1].grant.claimed))


def _results(answered: list[tuple[ToolCallPart, ApprovalRequest]]) -> DeferredToolResults:
    results = DeferredToolResults()
    for call, found in answered:
        if found.status == APPROVED:
            results.approvals[call.tool_call_id] = _approval(found, _arguments(call))
        else:
            results.approvals[call.tool_call_id] = _denial(found)
        results.metadata[call.tool_call_id] = {METADATA_KEY: found.id}
    return results


def results_for(
    client: HitlClient,
    requests: DeferredToolRequests,
    *,
    run_id: str,
    reason: Reason = "The agent asks to run this tool",
    wait: bool = True,
    timeout: float | None = None,
    **filing: Any,
) -> DeferredToolResults | None:
    """File, wait for and answer each approval ``requests`` asks for (see the module's rules). ``filing``
    goes to ``request_approval`` (``hitl_config``, ``context``, ``on_behalf_of``, ``callback_url``)."""
    calls = list(requests.approvals)
    filed = [client.request_approval(**_filing(call, run_id, reason, filing)) for call in calls]
    if not wait and any(found.pending for found in filed):
        return None
    decided = [found if not found.pending else client.wait(found.id, timeout=timeout) for found in filed]
    answered = _in_claim_order(calls, decided)
    for _, found in answered:
        if found.status == APPROVED:
            client.claim(found.id)
    return _results(answered)


async def aresults_for(
    client: AsyncHitlClient,
    requests: DeferredToolRequests,
    *,
    run_id: str,
    reason: Reason = "The agent asks to run this tool",
    wait: bool = True,
    timeout: float | None = None,
    **filing: Any,
) -> DeferredToolResults | None:
    """``results_for`` with the asynchronous client."""
    calls = list(requests.approvals)
    filed = [await client.request_approval(**_filing(call, run_id, reason, filing)) for call in calls]
    if not wait and any(found.pending for found in filed):
        return None
    decided = [
        found if not found.pending else await client.wait(found.id, timeout=timeout) for found in filed
    ]
    answered = _in_claim_order(calls, decided)
    for _, found in answered:
        if found.status == APPROVED:
            await client.claim(found.id)
    return _results(answered)


def _outcomes(results: DeferredToolResults, messages: Iterable[ModelMessage]) -> list[tuple[str, str, str]]:
    """(approval request id, ``succeeded``/``failed``, summary) of each approved call the messages show ran."""
    approved = {
        call_id: results.metadata[call_id][METADATA_KEY]
        for call_id, answer in results.approvals.items()
        if (answer is True or isinstance(answer, ToolApproved))
        and METADATA_KEY in results.metadata.get(call_id, {})
    }
    found: list[tuple[str, str, str]] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            request_id = approved.pop(getattr(part, "tool_call_id", ""), None)
            if request_id is None:
                continue
            if isinstance(part, ToolReturnPart):
                status = "succeeded" if part.outcome == "success" else "failed"
                found.append((request_id, status, _summary(part.content)))
            elif isinstance(part, RetryPromptPart):
                found.append((request_id, "failed", _summary(part.content)))
    return found


def _summary(content: Any) -> str:
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    return text[:1000]


def report_outcomes(
    client: HitlClient, results: DeferredToolResults, messages: Iterable[ModelMessage]
) -> int:
    """Report what each approved call did, read from the resumed run's ``new_messages()``: ``succeeded``
    when its tool returned, ``failed`` when it asked the model to retry. Returns how many were reported."""
    reported = _outcomes(results, messages)
    for request_id, status, summary in reported:
        client.report_outcome(request_id, status=status, summary=summary)
    return len(reported)


async def areport_outcomes(
    client: AsyncHitlClient, results: DeferredToolResults, messages: Iterable[ModelMessage]
) -> int:
    """``report_outcomes`` with the asynchronous client."""
    reported = _outcomes(results, messages)
    for request_id, status, summary in reported:
        await client.report_outcome(request_id, status=status, summary=summary)
    return len(reported)
