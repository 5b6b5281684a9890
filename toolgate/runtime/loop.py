"""The LLM tool loop with the approval gate in it.

Each model answer with tool calls is classified: ungated calls run, gated ones stop the loop before
they run. The ungated calls of a mixed batch run first; then the loop returns a PendingBatch and the
caller pauses the turn. Past ``maxPausesPerTurn`` the remaining gated calls get a DENIED result and
never run (audited). Every call is gated on what it asks for, whatever its id: an approval never
carries over to a later call (toolgate.gate.classification). Before anything else the response's call ids are made
distinct and storable (toolgate.runtime.call_ids); a call that reused an id of its own response is refused.
A recorded cancel of the turn is honoured before every model call and every tool run
(``ToolContext.stop_if_cancelled``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from approvals import metrics
from approvals.audit import append_audit_entry
from approvals.models import SubjectType
from toolgate.gate.batches import (
    PendingBatch,
    batch_fingerprint,
    distinct_names,
    freeze_transcript,
    gated_call,
    interim_text,
    pause_reason,
    pending_message,
)
from toolgate.gate.classification import classify, unapproved_request_check
from toolgate.gate.pinning import pin
from toolgate.gate.precedence import clamp_max_pauses, effective_tool_timeout, gate_active
from toolgate.gate.rules import resolve_rules
from toolgate.gate.tools import ToolCall, ToolContext, ToolSet
from toolgate.runtime.call_ids import ResponseCalls, distinct_call_ids
from toolgate.runtime.execution import run_call, tool_message
from toolgate.runtime.model_text import storable_turn
from toolgate.runtime.providers import ChatModel

PAUSE_CAP_RESULT = {"status": "DENIED", "reason": "approval-pause limit for this turn reached; do not retry"}


@dataclass
class LoopState:
    messages: list[dict[str, Any]]
    iteration: int = 0
    trace: list[dict[str, Any]] = field(default_factory=list)
    pauses_so_far: int = 0
    executed_ungated: list[str] = field(default_factory=list)


@dataclass
class LoopOutcome:
    reply: str | None = None
    batch: PendingBatch | None = None
    trace: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class LoopSettings:
    llm_task_id: str
    config: dict[str, Any] | None
    hitl_config: dict[str, Any] | None
    max_iterations: int
    user_input: str


def _assistant_message(content: str | None, calls: list[ToolCall]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or "{}"}}
            for c in calls
        ],
    }


def run_allowed(
    calls: list[ToolCall],
    toolset: ToolSet,
    context: ToolContext,
    state: LoopState,
    config: dict[str, Any] | None,
) -> None:
    """Run the calls the gate let through; each request one of them sends is judged again as sent."""
    for call in calls:
        context.stop_if_cancelled()
        checked = replace(context, check_request=unapproved_request_check(config, call, toolset))
        result = run_call(call, toolset, checked)
        state.messages.append(tool_message(call.id, result))
        state.trace.append({"type": "tool_call", "tool": call.name, "callId": call.id, "result": result})
        state.executed_ungated.append(call.name)


def refuse_repeated_ids(response: ResponseCalls, state: LoopState) -> None:
    """A call that reused an id of its own response is answered with why it did not run (toolgate.runtime.call_ids)."""
    for call in response.calls:
        if call.id in response.refused:
            result = response.refusal(call)
            state.messages.append(tool_message(call.id, result))
            state.trace.append({"type": "tool_call", "tool": call.name, "callId": call.id, "result": result})


def deny_over_cap(gated: list[ToolCall], context: ToolContext, state: LoopState) -> None:
    """Fail closed at the pause cap: the gated calls get DENIED results, never run; audited."""
    for call in gated:
        state.messages.append(tool_message(call.id, PAUSE_CAP_RESULT))
        state.trace.append({"type": "tool_error", "tool": call.name, "error": "hitl_pause_cap"})
    metrics.count_tool_guard("pause_cap")
    append_audit_entry(
        subject_type=SubjectType.CONVERSATION,
        subject_id=context.conversation_id,
        verb="hitl.tool.pause_cap",
        actor="system:pause-cap",
        automated=True,
        conversation_id=context.conversation_id,
        detail={
            "guard": "pause_cap",
            "fingerprint": batch_fingerprint(gated),
            "toolNames": sorted({c.name for c in gated}),
        },
    )


def build_batch(
    *,
    content: str | None,
    gated: list[ToolCall],
    gate_reasons: dict[str, str],
    toolset: ToolSet,
    context: ToolContext,
    state: LoopState,
    loop: LoopSettings,
) -> PendingBatch:
    rules = resolve_rules(loop.config, gated, toolset)
    for pattern in rules.matched_patterns:
        metrics.count_rule_matched(pattern)
    calls = [
        gated_call(
            call, toolset, gate_reasons.get(call.id, ""), (rules.per_call.get(call.id) or {}).get("match", "")
        )
        for call in gated
    ]
    for call, stored in zip(gated, calls, strict=True):
        stored.request_fingerprint, stored.request_preview = pin(
            toolset.tools.get(call.name), call.arguments, context
        )
    names = distinct_names(calls)
    config = loop.config or {}
    transcript, omitted = freeze_transcript(state.messages)
    pause_count = state.pauses_so_far + 1
    return PendingBatch(
        llm_task_id=loop.llm_task_id,
        calls=calls,
        transcript=transcript,
        transcript_omitted=omitted,
        iteration_index=state.iteration,
        executed_ungated_calls=list(state.executed_ungated),
        trace=list(state.trace),
        fingerprint=batch_fingerprint(gated),
        pause_count_this_turn=pause_count,
        effective_config=config,
        effective_rule=rules.governing,
        interim_text=interim_text(content),
        reason=pause_reason(rules.governing, config, names),
        pending_message=pending_message(rules.governing, config, names, pause_count),
        timeout_config=effective_tool_timeout(rules.governing, config, loop.hitl_config),
        matched_rules=rules.matching_rules,
    )


def run_tool_loop(
    *, model: ChatModel, toolset: ToolSet, context: ToolContext, state: LoopState, loop: LoopSettings
) -> LoopOutcome:
    """Call the model until it answers without tool calls, a gated call pauses, or iterations run out."""
    content: str | None = None
    while state.iteration < loop.max_iterations:
        context.stop_if_cancelled()
        turn = storable_turn(model.complete(state.messages, toolset.for_model(), user_input=loop.user_input))
        content = turn.content
        if not turn.tool_calls:
            return LoopOutcome(reply=content or "", trace=state.trace)
        response = distinct_call_ids(turn.tool_calls)
        state.messages.append(_assistant_message(content, response.calls))
        refuse_repeated_ids(response, state)
        calls = response.runnable
        if gate_active(loop.config):
            result = classify(calls, loop.config, toolset, context=context)
            allowed, gated, reasons = result.allowed, result.gated, result.gate_reasons
        else:
            allowed, gated, reasons = calls, [], {}
        if gated and state.pauses_so_far >= clamp_max_pauses(loop.config):
            run_allowed(allowed, toolset, context, state, loop.config)
            deny_over_cap(gated, context, state)
        elif gated:
            run_allowed(allowed, toolset, context, state, loop.config)
            return LoopOutcome(
                batch=build_batch(
                    content=content,
                    gated=gated,
                    gate_reasons=reasons,
                    toolset=toolset,
                    context=context,
                    state=state,
                    loop=loop,
                ),
                trace=state.trace,
            )
        else:
            run_allowed(allowed, toolset, context, state, loop.config)
        state.iteration += 1
    return LoopOutcome(
        reply=content or f"(stopped after {loop.max_iterations} tool iterations)", trace=state.trace
    )
