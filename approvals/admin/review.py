"""What a reviewer reads on the decision page, from the pause's allow-listed details (never raw data).

The tool-call details are filled by the tool gate; this module renders whatever is there and treats
every field as optional, so a pause written by an older or newer gate still shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.timesince import timesince, timeuntil

from approvals.models import Pause, PauseKind, TimeoutPolicy, Verdict
from approvals.pause_summaries import pause_details


def as_text(value: Any) -> str:
    """Strings as they are; anything else as indented JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def describe_deadline(due_at: datetime | None, now: datetime) -> tuple[str, bool]:
    """The deadline as a reviewer reads it, e.g. "14 minutes left" or "overdue by 3 minutes"."""
    if due_at is None:
        return "no deadline", False
    if due_at < now:
        return f"overdue by {timesince(due_at, now, depth=1)}", True
    return f"{timeuntil(due_at, now, depth=2)} left", False


TIMEOUT_DECIDER = "system:timeout"


def ended_text(pause: Pause) -> str:
    """What became of a pause that no longer waits, and when, for the row where a pending one shows its
    deadline: never "no deadline" beside a policy that had one."""
    when = pause.decided_at or pause.resolved_at
    at = f" at {date_format(timezone.localtime(when), 'Y-m-d H:i:s T')}" if when else ""
    if pause.verdict == Verdict.CANCELLED:
        if pause.decided_by == TIMEOUT_DECIDER:
            return f"timed out{at}: cancelled by its policy ({pause.timeout_policy})"
        return f"cancelled by {pause.decided_by or 'someone'}{at}"
    if pause.decided_by == TIMEOUT_DECIDER:
        return f"timed out{at}: {pause.verdict or 'decided'} by its policy ({pause.timeout_policy})"
    if pause.verdict:
        return f"decided{at}: {pause.verdict} by {pause.decided_by or 'someone'}"
    return f"no longer waiting ({pause.status})"


def on_timeout_text(pause: Pause) -> str:
    """The pause's timeout policy as it applies: a finite one with its duration, and waiting forever
    without one (an approvalTimeout kept beside WAIT_INDEFINITELY never fires, so it is not shown)."""
    if pause.timeout_policy in (TimeoutPolicy.AUTO_APPROVE, TimeoutPolicy.AUTO_REJECT, TimeoutPolicy.ABORT):
        return (
            f"{pause.timeout_policy} after {pause.approval_timeout}"
            if pause.approval_timeout
            else pause.timeout_policy
        )
    return "waits until someone decides (WAIT_INDEFINITELY)"


@dataclass(frozen=True)
class ReviewCall:
    index: int
    call_id: str
    tool_name: str
    source: str
    arguments: str
    args_truncated: bool
    gate_reason: str
    matched_rule: str
    request_preview: str
    pinned: bool
    # places holding a model-chosen value that looks like a credential, shown as sent (reviewer view only)
    warnings: tuple[str, ...] = ()

    @property
    def decidable(self) -> bool:
        """A call without an id cannot be addressed in toolDecisions: it follows the overall verdict."""
        return bool(self.call_id)

    @property
    def argument_lines(self) -> list[tuple[str, str]] | None:
        """Each argument on its own line, in the model's order, its value as JSON (a text in quotes: a
        reviewer tells "2500" from 2500); None when the arguments are not a whole JSON object (cut short,
        or another value)."""
        if self.args_truncated:
            return None
        try:
            parsed = json.loads(self.arguments)
        except ValueError:
            return None
        if not isinstance(parsed, dict):
            return None
        return [(str(key), json.dumps(value, ensure_ascii=False)) for key, value in parsed.items()]


@dataclass(frozen=True)
class ReviewNotice:
    call_id: str
    tool_name: str
    text: str


def review_call(index: int, raw: Any) -> ReviewCall:
    call = raw if isinstance(raw, dict) else {"arguments": raw}
    return ReviewCall(
        index=index,
        call_id=str(call.get("callId") or call.get("id") or ""),
        tool_name=str(call.get("toolName") or call.get("name") or "(unnamed tool)"),
        source=as_text(call.get("source")),
        arguments=as_text(call.get("arguments")),
        args_truncated=bool(call.get("argsTruncated")),
        gate_reason=as_text(call.get("gateReason")),
        matched_rule=as_text(call.get("matchedRule") or call.get("rule") or call.get("matchedPattern")),
        request_preview=_preview_text(call.get("requestPreview")),
        pinned=bool(call.get("requestPinned")),
        warnings=tuple(
            str(warning.get("field") or "")
            for warning in call.get("warnings") or []
            if isinstance(warning, dict)
        ),
    )


def review_notice(raw: Any) -> ReviewNotice:
    if isinstance(raw, dict):
        text = raw.get("message") or raw.get("detail") or raw.get("status") or ""
        return ReviewNotice(
            call_id=str(raw.get("callId") or raw.get("id") or ""),
            tool_name=str(raw.get("toolName") or raw.get("name") or ""),
            text=as_text(text),
        )
    return ReviewNotice(call_id="", tool_name="", text=as_text(raw))


@dataclass(frozen=True)
class PauseReview:
    kind: str
    reason: str
    actions: list[str]
    calls: list[ReviewCall]
    outcome_unknown: list[ReviewNotice]
    executed_ungated: list[ReviewNotice]


def _entries(details: dict[str, Any], key: str) -> list[Any]:
    value = details.get(key)
    return list(value) if isinstance(value, list | tuple) else []


def _preview_text(preview: Any) -> str:
    """The request as sent: its request line with the whole target, query included, then its headers and
    body."""
    if isinstance(preview, dict):
        lines = [f"{preview.get('method') or ''} {_target(preview)}".strip()]
        lines += [f"{name}: {value}" for name, value in (preview.get("headers") or {}).items()]
        if preview.get("body"):
            lines.append(str(preview["body"]) + (" …(truncated)" if preview.get("bodyTruncated") else ""))
        return "\n".join(lines)
    return as_text(preview)


def _target(preview: dict[str, Any]) -> str:
    """``url`` (the whole target as sent); a preview kept before it had one: the URI and its query pairs."""
    if preview.get("url"):
        return str(preview["url"])
    query = preview.get("queryParams") or {}
    pairs = "&".join(f"{name}={value}" for name, value in query.items()) if isinstance(query, dict) else ""
    return str(preview.get("uri") or "") + (f"?{pairs}" if pairs else "")


def pause_review(pause: Pause, *, reviewer: bool = False) -> PauseReview:
    """Everything from pause_details(): the same allow-listed fields every surface gets; ``reviewer``: the
    view of a reviewer deciding the pause (approvals.access.sees_what_runs)."""
    details = pause_details(pause, reviewer=reviewer)
    if pause.kind == PauseKind.TOOL_CALL:
        calls = [review_call(i, raw) for i, raw in enumerate(_entries(details, "calls"))]
        names = {call.call_id: call.tool_name for call in calls}
        unknown = [
            review_notice(raw)
            if not isinstance(raw, str)
            else ReviewNotice(
                call_id=raw,
                tool_name=names.get(raw, ""),
                text="an earlier approved attempt was claimed but never recorded a result: the outcome is unknown",
            )
            for raw in _entries(details, "outcomeUnknown")
        ]
        ungated = [
            review_notice(raw)
            if not isinstance(raw, str)
            else ReviewNotice(call_id="", tool_name=raw, text="")
            for raw in _entries(details, "executedUngatedCalls")
        ]
        return PauseReview(
            kind=pause.kind,
            reason=pause.reason,
            actions=[],
            calls=calls,
            outcome_unknown=unknown,
            executed_ungated=ungated,
        )
    return PauseReview(
        kind=pause.kind,
        reason=pause.reason,
        actions=[str(a) for a in details.get("actions") or []],
        calls=[],
        outcome_unknown=[step_notice(raw) for raw in _entries(details, "outcomeUnknown")],
        executed_ungated=[],
    )


def step_notice(raw: Any) -> ReviewNotice:
    """A rule pause's step of unknown outcome (pause_details: {step, method, path, claimedAt}, redacted)."""
    step = raw if isinstance(raw, dict) else {"step": raw}
    target = f"{step.get('method') or ''} {step.get('path') or ''}".strip()
    claimed = f", claimed at {step['claimedAt']}" if step.get("claimedAt") else ""
    return ReviewNotice(
        call_id="",
        tool_name=str(step.get("step") or ""),
        text=f"{target}{claimed}: an earlier run of this continuation sent it and never recorded a result; "
        "the outcome is unknown and it is not sent again".lstrip(": "),
    )
