"""Continuing a tool pause: the same LLM task re-enters its loop with the frozen transcript.

Per call, in batch order: a rejected call becomes a structured rejection result carrying the reviewer's
note; an approved call is claimed in the journal and run once (with the reviewer's amended arguments if
any, and its result says so); an earlier attempt's EXECUTED entry is replayed, an EXECUTING one is
reported as outcome unknown. That execution consumes the approval: when the model continues, nothing
approved is left to clear, so every call it issues is gated afresh (same id or not, same call or not)
and a gated one pauses again with a new epoch.

The approved calls run in the context the caller passes for them (``approved_context``, built in
conversations: the human approver's identity when one approved them, who saw each request; else the
turn's own); every other call of the turn runs as the turn's own user.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any

from approvals import metrics
from approvals.audit import append_audit_entry
from approvals.decision_notices import automated_decision_text, is_guidance
from approvals.models import Pause, SubjectType, Verdict
from toolgate.gate import journal
from toolgate.gate.call_outcomes import CallDecision, decision_for
from toolgate.gate.pinning import CHANGED, pinned_request_check, request_changed_reason
from toolgate.gate.tools import ToolCall, ToolContext, ToolSet
from toolgate.models import JournalStatus, PendingToolBatch, PendingToolCall
from toolgate.runtime.execution import run_call, tool_message
from toolgate.runtime.loop import LoopState

logger = logging.getLogger(__name__)

REJECTION_INSTRUCTION = (
    "The reviewer declined this action. Do not retry this exact call; explain the situation "
    "to the user and offer alternatives."
)
# A reply with guidance (approvals.decision_notices.is_guidance): the note is the reviewer's instruction.
GUIDANCE_INSTRUCTION = (
    "The reviewer declined this call and gave guidance: {note} Treat the reviewer's guidance as an "
    "instruction and follow it; do not retry this exact call unless the guidance asks for it."
)
AUTOMATED_REJECTION_ADVICE = (
    "Do not retry this exact call; explain the situation to the user and offer alternatives."
)
OUTCOME_UNKNOWN = {
    "status": "EXECUTION_OUTCOME_UNKNOWN",
    "message": "a previous execution attempt was interrupted; it may or may not have taken effect "
    "- verify externally before retrying",
}
TRUNCATED = {"status": "NOT_EXECUTED", "reason": "arguments exceeded the persistable size cap"}
# What the step says when the paused llm task drifted away (conversations.lifecycle.config_drift).
CONFIG_DRIFT_TEXT = (
    "The pending approval could not be applied because the agent's configuration changed. "
    "No gated action was executed."
)


def _audit(pause: Pause, verb: str, detail: dict[str, Any]) -> None:
    append_audit_entry(
        subject_type=pause.subject_type,
        subject_id=pause.subject_id,
        verb=verb,
        actor="system:toolgate",
        automated=True,
        conversation_id=pause.subject_id if pause.subject_type == SubjectType.CONVERSATION else None,
        pause_id=pause.id,
        epoch=pause.epoch,
        detail=detail,
    )


def execute_approved(
    call: PendingToolCall, decision: CallDecision, pause: Pause, toolset: ToolSet, context: ToolContext
) -> Any:
    """Run an approved call at most once, through the journal."""
    if call.args_truncated:
        return dict(TRUNCATED)
    refusal = pre_execution_refusal(call, decision, toolset, context)
    if refusal is not None:
        _request_changed(pause, call, refusal)
        return {"status": "NOT_EXECUTED", "reason": refusal}
    if not journal.claim(
        conversation_id=pause.subject_id,
        pause_epoch=pause.epoch,
        call_id=call.call_id,
        tool_name=call.tool_name,
        decided_by=pause.decided_by,
    ):
        entry = journal.entry_for(pause_epoch=pause.epoch, call_id=call.call_id)
        if entry is not None and entry.status == JournalStatus.EXECUTED:
            return _stored_result(entry.result)
        logger.warning("hitl.tool.outcome_unknown: tool=%s callId=%s", call.tool_name, call.call_id)
        _audit(pause, "hitl.tool.outcome_unknown", {"tool": call.tool_name, "callId": call.call_id})
        return dict(OUTCOME_UNKNOWN)
    arguments = decision.amended if decision.amended is not None else call.arguments_raw
    # a pinned call sends only the request that was approved, byte for byte (compared as it leaves)
    pinned = pinned_request_check(call) if decision.amended is None else None
    result = run_call(
        ToolCall(call.call_id, call.tool_name, arguments), toolset, replace(context, check_request=pinned)
    )
    if decision.amended is not None:
        result = {"status": "EXECUTED", "argsAmendedByReviewer": True, "result": result}
    elif result == {"status": "NOT_EXECUTED", "reason": CHANGED}:
        _request_changed(pause, call, CHANGED)
    journal.mark_executed(
        pause_epoch=pause.epoch,
        call_id=call.call_id,
        result=json.dumps(result, ensure_ascii=False, default=str),
    )
    return result


def _request_changed(pause: Pause, call: PendingToolCall, reason: str) -> None:
    """An approved call refused because its request changed: the ledger entry, and the WARN line EDDI's
    operators alert on (its marker; the tool, call and pause only, quoted: the names are the model's)."""
    logger.warning(
        "hitl.tool.request_changed tool=%r callId=%r pauseId=%s", call.tool_name, call.call_id, pause.id
    )
    _audit(
        pause, "hitl.tool.request_changed", {"tool": call.tool_name, "callId": call.call_id, "reason": reason}
    )


def _stored_result(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def pre_execution_refusal(
    call: PendingToolCall, decision: CallDecision, toolset: ToolSet, context: ToolContext
) -> str | None:
    """Why an approved call must not run after all (request pinning re-check); None to proceed."""

    return request_changed_reason(call, decision.amended, toolset, context)


def rejection_instruction(pause: Pause) -> str:
    """What the model is told to do with a rejected call; an automated rejection never claims a reviewer
    (approvals/decision_notices.py). The status stays REJECTED_BY_REVIEWER, as EDDI fixes it."""
    if pause.automated:
        return f"{automated_decision_text(pause)} {AUTOMATED_REJECTION_ADVICE}"
    if is_guidance(pause):
        return GUIDANCE_INSTRUCTION.format(note=pause.note)
    return REJECTION_INSTRUCTION


def apply_verdicts(
    batch: PendingToolBatch,
    toolset: ToolSet,
    messages: list[dict[str, Any]],
    *,
    approved_context: ToolContext,
) -> None:
    """Append one tool result per gated call, running each approved one at most once as
    ``approved_context`` (a rejected call runs nothing)."""
    pause = batch.pause
    for call in batch.calls.all():
        decision = decision_for(call, pause)
        outcome = "timeout" if pause.decided_by == "system:timeout" else decision.verdict.lower()
        metrics.count_write_approval(outcome)
        if decision.verdict != Verdict.APPROVED:
            result: Any = {
                "status": "REJECTED_BY_REVIEWER",
                "tool": call.tool_name,
                "note": decision.note,
                "instruction": rejection_instruction(pause),
            }
        else:
            approved_context.stop_if_cancelled()
            result = execute_approved(call, decision, pause, toolset, approved_context)
        messages.append(tool_message(call.call_id, result))


def resume_state(
    batch: PendingToolBatch, toolset: ToolSet, rebuild_messages: Any, *, approved_context: ToolContext
) -> LoopState:
    """The loop state to continue from, with every verdict of the batch applied (the batch's llm task is
    the one running: the resume point was checked for config drift before the continuation ran)."""
    messages = list(batch.transcript) if batch.transcript is not None else rebuild_messages(batch)
    apply_verdicts(batch, toolset, messages, approved_context=approved_context)
    return LoopState(
        messages=messages,
        iteration=batch.iteration_index + 1,
        trace=list(batch.trace),
        pauses_so_far=batch.pause_count_this_turn,
        executed_ungated=list(batch.executed_ungated_calls),
    )
