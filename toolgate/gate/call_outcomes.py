"""What the decision of a tool pause says for each call, and what then became of each call.

``decision_for`` is the one reading of a decision for one call (its own verdict, else the pause's; its own
note, else the pause's; the reviewer's amended arguments, only for an approved call): the continuation
runs by it, and ``call_outcomes`` shows it on the decision page of a decided pause, with what the journal
and the ledger say happened: the call ran (and what it returned), did not run and why, is not run yet,
or has an outcome nobody knows.

What the page gets is redacted like every view of a decided pause: the amended arguments and the result
through the one redaction filter, a result cut at ``RESULT_SHOWN_BYTES``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from approvals.models import AuditEntry, Pause, PauseStatus, Verdict
from approvals.pause_kinds import CallOutcome
from toolgate.gate.decision_validation import effective_verdict
from toolgate.gate.journal import cap_utf8
from toolgate.models import JournalEntry, JournalStatus, JournalStepKind, PendingToolCall
from toolgate.outbound import redact

RESULT_SHOWN_BYTES = 8_192
REQUEST_CHANGED_VERB = "hitl.tool.request_changed"


@dataclass
class CallDecision:
    verdict: str
    note: str
    amended: str | None


def decision_for(call: PendingToolCall, pause: Pause) -> CallDecision:
    entries = (pause.decision_details or {}).get("toolDecisions") or {}
    entry = entries.get(call.call_id) if isinstance(entries.get(call.call_id), dict) else None
    verdict = effective_verdict(call.call_id, pause.decision_details or {}, pause.verdict)
    note = (entry.get("note") or "") if entry is not None else pause.note
    amended = entry.get("amendedArguments") if entry is not None and verdict == Verdict.APPROVED else None
    return CallDecision(verdict=verdict, note=note or "", amended=amended)


def _when(value: Any) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S %Z")


def _shown(text: str) -> str:
    """A stored result as the page shows it: redacted, indented when it is JSON, cut when long."""
    redacted = redact(text)
    try:
        redacted = json.dumps(json.loads(redacted), indent=2, ensure_ascii=False)
    except ValueError:
        pass
    shown, cut = cap_utf8(redacted, RESULT_SHOWN_BYTES)
    return shown + (" …(cut)" if cut else "")


def _refused(result: str) -> str | None:
    """The reason of a NOT_EXECUTED result (the request changed as it left), None for any other result."""
    try:
        parsed = json.loads(result)
    except ValueError:
        return None
    if isinstance(parsed, dict) and parsed.get("status") == "NOT_EXECUTED":
        return str(parsed.get("reason") or "refused")
    return None


def _approved_outcome(
    call: PendingToolCall, pause: Pause, entry: JournalEntry | None, refusal: str | None
) -> tuple[bool, str, str]:
    """(ran, state, result) of an approved call."""
    if call.args_truncated:
        return False, "Did not run: its arguments were too large to keep.", ""
    if refusal is not None:
        return False, f"Did not run: {refusal}.", ""
    if entry is None:
        if pause.status == PauseStatus.RESOLVED:
            return False, "No run on record (not run, or its journal entry has expired).", ""
        return False, "Not run yet: the continuation of this decision has not reached it.", ""
    if entry.status == JournalStatus.EXECUTING:
        return (
            False,
            f"Outcome unknown: claimed at {_when(entry.claimed_at)}, no result was recorded; it is never run "
            "again.",
            "",
        )
    if (reason := _refused(entry.result)) is not None:
        return False, f"Did not run: {reason}.", ""
    ran_at = _when(entry.executed_at) if entry.executed_at else "?"
    return True, f"Ran once, at {ran_at}.", _shown(entry.result)


def call_outcomes(pause: Pause) -> dict[str, CallOutcome]:
    """What became of each gated call of a decided ``pause``, by call id (empty while it waits)."""
    if pause.status == PauseStatus.PENDING:
        return {}
    calls = list(PendingToolCall.objects.filter(batch__pause=pause).order_by("position"))
    entries = {
        entry.call_id: entry
        for entry in JournalEntry.objects.filter(pause_epoch=pause.epoch, step_kind=JournalStepKind.TOOL_CALL)
    }
    refusals = {
        str(detail.get("callId")): str(detail.get("reason") or "the request changed")
        for detail in AuditEntry.objects.filter(pause_id=pause.id, verb=REQUEST_CHANGED_VERB).values_list(
            "detail", flat=True
        )
        if isinstance(detail, dict)
    }
    outcomes = {}
    for call in calls:
        if pause.verdict == Verdict.CANCELLED or pause.status == PauseStatus.CANCELLED:
            outcomes[call.call_id] = CallOutcome(
                call.call_id, Verdict.CANCELLED, "", None, False, "Did not run: the pause was cancelled."
            )
            continue
        decision = decision_for(call, pause)
        if decision.verdict != Verdict.APPROVED:
            outcomes[call.call_id] = CallOutcome(
                call.call_id, decision.verdict, decision.note, None, False, "Did not run: rejected."
            )
            continue
        ran, state, result = _approved_outcome(
            call, pause, entries.get(call.call_id), refusals.get(call.call_id)
        )
        amended = redact(decision.amended) if decision.amended is not None else None
        outcomes[call.call_id] = CallOutcome(
            call.call_id, decision.verdict, decision.note, amended, ran, state, result
        )
    return outcomes
