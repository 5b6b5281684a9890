"""Building the batch of gated calls a tool pause waits on, and storing it with the pause.

Per call: id, tool name, source, raw arguments (capped at 256 KiB, with a truncated flag), redacted
arguments (at most 32 KiB), the require pattern that gated it and the rule that tuned it. Per batch:
the frozen transcript (capped at HITL_TRANSCRIPT_MAX_BYTES; omitted beyond it), the ungated calls that
already ran, the pause count this turn, the effective config and governing rule, and a canonical-JSON
fingerprint of the gated calls for the no-progress guard.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from approvals.models import Pause
from toolgate.journal import cap_utf8
from toolgate.models import PendingToolBatch, PendingToolCall
from toolgate.redaction import redact
from toolgate.tools import ToolCall, ToolSet

ARGS_RAW_MAX_BYTES = 262_144
ARGS_REDACTED_MAX_BYTES = 32_768
TRACE_ENTRY_MAX_BYTES = 65_536
INTERIM_TEXT_MAX_CHARS = 2000
PAUSE_REASON_MAX_CHARS = 500
DEFAULT_REASON = "Tool call requires approval: {toolNames}"
# Read by the end user, who is not the one approving: say who the step waits for.
DEFAULT_PENDING = (
    "This step is waiting for a reviewer's approval before {toolNames} can run. "
    "You will receive the result once a reviewer decides."
)


@dataclass
class GatedCall:
    call_id: str
    tool_name: str
    source: str
    arguments_raw: str
    args_truncated: bool
    arguments_redacted: str
    gate_reason: str
    matched_rule: str = ""
    request_fingerprint: str = ""
    request_preview: dict[str, Any] | None = None


@dataclass
class PendingBatch:
    """A gated batch before it is stored: everything the pause and its continuation need."""

    llm_task_id: str
    calls: list[GatedCall]
    transcript: list[dict[str, Any]] | None
    transcript_omitted: bool
    iteration_index: int
    executed_ungated_calls: list[str]
    trace: list[dict[str, Any]]
    fingerprint: str
    pause_count_this_turn: int
    effective_config: dict[str, Any]
    effective_rule: dict[str, Any] | None
    interim_text: str
    reason: str
    pending_message: str
    timeout_config: dict[str, Any]
    auto_approve_count: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    # the rules that tuned the gated calls: any of them may forbid self-approval
    matched_rules: list[dict[str, Any]] = field(default_factory=list)

    @property
    def tool_names(self) -> list[str]:
        return distinct_names(self.calls)


def distinct_names(calls: list[GatedCall]) -> list[str]:
    seen: list[str] = []
    for call in calls:
        if call.tool_name not in seen:
            seen.append(call.tool_name)
    return seen


def canonical_arguments(arguments: str) -> Any:
    try:
        return json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return arguments or ""


def batch_fingerprint(calls: list[ToolCall] | list[GatedCall]) -> str:
    """sha256 over the canonical JSON of the gated calls (names and arguments, sorted keys, ids
    excluded), so re-ordering arguments or calls cannot make the same batch look new."""
    items = []
    for call in calls:
        name = call.tool_name if isinstance(call, GatedCall) else call.name
        raw = call.arguments_raw if isinstance(call, GatedCall) else call.arguments
        items.append([name, canonical_arguments(raw)])
    items.sort(key=lambda item: json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
    text = json.dumps(items, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def gated_call(call: ToolCall, toolset: ToolSet, gate_reason: str, matched_rule: str) -> GatedCall:
    raw, truncated = cap_utf8(call.arguments or "", ARGS_RAW_MAX_BYTES)
    redacted, _ = cap_utf8(redact(call.arguments or ""), ARGS_REDACTED_MAX_BYTES)
    return GatedCall(
        call_id=call.id,
        tool_name=call.name,
        source=toolset.source_of(call.name),
        arguments_raw=raw,
        args_truncated=truncated,
        arguments_redacted=redacted,
        gate_reason=gate_reason,
        matched_rule=matched_rule,
    )


def freeze_transcript(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]] | None, bool]:
    """The messages as JSON, or (None, True) when they exceed HITL_TRANSCRIPT_MAX_BYTES."""
    try:
        text = json.dumps(messages, ensure_ascii=False)
    except (TypeError, ValueError):
        return None, True
    if len(text.encode("utf-8")) > settings.HITL_TRANSCRIPT_MAX_BYTES:
        return None, True
    return json.loads(text), False


def cap_trace(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    capped = []
    for entry in trace:
        entry = dict(entry)
        if "result" in entry:
            text = entry["result"] if isinstance(entry["result"], str) else json.dumps(entry["result"])
            entry["result"], _ = cap_utf8(text, TRACE_ENTRY_MAX_BYTES)
        capped.append(entry)
    return capped


def with_tool_names(template: str, names: list[str]) -> str:
    return template.replace("{toolNames}", ", ".join(names))


def pause_reason(rule: dict[str, Any] | None, config: dict[str, Any], names: list[str]) -> str:
    """First non-blank of the governing rule's, the config's, or the default reason; redacted, ≤ 500."""
    template = next(
        (
            text
            for text in ((rule or {}).get("pauseReason"), config.get("pauseReason"))
            if isinstance(text, str) and text.strip()
        ),
        DEFAULT_REASON,
    )
    return redact(with_tool_names(template, names))[:PAUSE_REASON_MAX_CHARS]


def pending_message(
    rule: dict[str, Any] | None, config: dict[str, Any], names: list[str], pause_count: int
) -> str:
    """The end-user message shown while the turn waits (public output of the paused step)."""
    for text in ((rule or {}).get("pendingMessage"), config.get("pendingMessage")):
        if isinstance(text, str) and text.strip():
            return with_tool_names(text, names)
    if not names:
        return (
            "This action requires human approval before it can proceed. "
            "You will receive the result once a reviewer decides."
        )
    message = with_tool_names(DEFAULT_PENDING, names)
    return message + (f" (approval {pause_count} this turn)" if pause_count >= 2 else "")


def interim_text(content: str | None) -> str:
    text = redact((content or "").strip())
    if len(text) > INTERIM_TEXT_MAX_CHARS:
        text = text[: INTERIM_TEXT_MAX_CHARS - 1] + "…"
    return text


def store_batch(pause: Pause, batch: PendingBatch) -> PendingToolBatch:
    """Save the batch with its pause, inside the transaction that opens the pause."""
    stored = PendingToolBatch.objects.create(
        pause=pause,
        conversation_id=pause.subject_id,
        llm_task_id=batch.llm_task_id,
        llm_task_index=int(pause.bookmark.get("taskIndex", 0)),
        workflow_id=str(pause.bookmark.get("workflowId", "")),
        iteration_index=batch.iteration_index,
        transcript=batch.transcript,
        transcript_omitted=batch.transcript_omitted,
        executed_ungated_calls=batch.executed_ungated_calls,
        trace=cap_trace(batch.trace),
        fingerprint=batch.fingerprint,
        auto_approve_count=batch.auto_approve_count,
        pause_count_this_turn=batch.pause_count_this_turn,
        effective_config=batch.effective_config,
        effective_rule=batch.effective_rule,
        interim_text=batch.interim_text,
        pending_message=batch.pending_message,
    )
    PendingToolCall.objects.bulk_create(
        [
            PendingToolCall(
                batch=stored,
                position=position,
                call_id=call.call_id,
                tool_name=call.tool_name,
                source=call.source,
                arguments_raw=call.arguments_raw,
                args_truncated=call.args_truncated,
                arguments_redacted=call.arguments_redacted,
                gate_reason=call.gate_reason,
                matched_rule=call.matched_rule,
                request_fingerprint=call.request_fingerprint,
                request_preview=call.request_preview,
            )
            for position, call in enumerate(batch.calls)
        ]
    )
    return stored
