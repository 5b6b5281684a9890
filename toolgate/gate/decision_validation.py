"""Validating a decision on a tool-call pause, completely, before the compare-and-set.

Order and messages as EDDI's resume body rules: top-level REJECTED with an APPROVED call is a
contradiction; each listed call must be pending, have a verdict, a note of at most 1024 characters,
and amended arguments only when APPROVED, never on a truncated call, a JSON object of at most 32 KiB.
Amended values left as they were shown redacted take the call's original values (toolgate.gate.amendments):
the merged arguments replace the reviewer's text in the decision, so what is stored, run and digested is
the same. Returns the audit detail of the decision: per-call verdicts, amended flags and an arguments digest —
never the arguments themselves.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import transaction

from approvals import metrics
from approvals.decision_input import DecisionInput, parse_verdict
from approvals.models import Pause, Verdict
from common.body_rules import body_errors
from common.errors import BadRequest
from common.field_errors import utf16_length
from toolgate.gate.amendments import AmendmentRefused, merged_amendment
from toolgate.models import PendingToolCall

NOTE_MAX = 1024
AMENDED_MAX_BYTES = 32_768


def _bad(message: str, field: str, **extra: Any) -> BadRequest:
    return BadRequest(message, errors=[{"field": field, "message": message, **extra}])


def _check_entry(call_id: str, entry: Any, call: PendingToolCall) -> tuple[str, str | None]:
    where = f"toolDecisions['{call_id}']"
    field = f"toolDecisions.{call_id}"
    if not isinstance(entry, dict):
        raise _bad(f"{where} must be an object with a verdict", field)
    verdict = parse_verdict(entry.get("verdict"))
    if verdict is None:
        raise _bad(f"{where}.verdict is required (APPROVED or REJECTED)", f"{field}.verdict")
    note = entry.get("note")
    if note is not None and (not isinstance(note, str) or utf16_length(note) > NOTE_MAX):
        raise _bad(f"{where}.note exceeds the maximum length of {NOTE_MAX} characters", f"{field}.note")
    _refuse_unstorable(note, f"{field}.note")
    amended = entry.get("amendedArguments")
    if amended is None:
        return verdict, None
    return verdict, _checked_amendment(call_id, amended, verdict, call)


def _checked_amendment(call_id: str, amended: Any, verdict: str, call: PendingToolCall) -> str:
    """The reviewer's amended arguments of one call: a JSON object, storable, within its size, on an
    approved call whose arguments were kept whole at pause time."""
    where = f"toolDecisions['{call_id}']"
    field = f"toolDecisions.{call_id}"
    if verdict != Verdict.APPROVED:
        raise _bad(
            f"{where}.amendedArguments is only valid for an APPROVED call", f"{field}.amendedArguments"
        )
    if call.args_truncated:
        raise _bad(
            f"call '{call_id}' was truncated at pause time and cannot be amended; approve or reject it as-is",
            f"{field}.amendedArguments",
        )
    if isinstance(amended, dict):  # the object itself (MCP's schema, most clients): checked as its JSON text
        amended = json.dumps(amended, ensure_ascii=False)
    if not isinstance(amended, str):
        raise _bad(
            f"{where}.amendedArguments must be a JSON object (or a string holding one)",
            f"{field}.amendedArguments",
        )
    _refuse_unstorable(amended, f"{field}.amendedArguments")
    if len(amended.encode("utf-8")) > AMENDED_MAX_BYTES:
        raise _bad(
            f"{where}.amendedArguments exceeds the maximum size of {AMENDED_MAX_BYTES} bytes",
            f"{field}.amendedArguments",
        )
    try:
        parsed = json.loads(amended)
    except ValueError as exc:
        raise _bad(
            f"{where}.amendedArguments is not valid JSON: {exc}", f"{field}.amendedArguments"
        ) from None
    except RecursionError:
        raise _bad(f"{where}.amendedArguments is nested too deeply", f"{field}.amendedArguments") from None
    if not isinstance(parsed, dict):
        raise _bad(f"{where}.amendedArguments must be a JSON object", f"{field}.amendedArguments")
    # The text is storable, but what it decodes to ("\\u0000", 1e400) reaches the tool, the journal and the
    # transcript.
    inner = body_errors(parsed, field="arguments")
    if inner:
        raise _bad(
            f"{where}.amendedArguments: {inner[0]['field']} {inner[0]['message']}",
            f"{field}.amendedArguments",
        )
    try:
        return merged_amendment(amended, parsed, call)
    except AmendmentRefused as exc:
        # argumentPath: where in the arguments, for a client (the admin page) to show it by that field
        raise _bad(
            f"{where}.amendedArguments: {exc}", f"{field}.amendedArguments", argumentPath=list(exc.path)
        ) from None


def _refuse_unstorable(value: Any, field: str) -> None:
    errors = body_errors(value, field=field)
    if errors:
        raise BadRequest(f"{errors[0]['field']}: {errors[0]['message']}", errors=errors)


def effective_verdict(call_id: str, decision_details: dict[str, Any], top_level: str) -> str:
    """A call's verdict: its own, else the top-level one, else REJECTED (fail closed)."""
    entry = (decision_details.get("toolDecisions") or {}).get(call_id)
    own = parse_verdict(entry.get("verdict")) if isinstance(entry, dict) else None
    return own or parse_verdict(top_level) or Verdict.REJECTED


def validate_tool_decision(pause: Pause, decision: DecisionInput) -> dict[str, Any]:
    calls = {call.call_id: call for call in PendingToolCall.objects.filter(batch__pause=pause)}
    decisions = decision.tool_decisions or {}
    if decision.verdict == Verdict.REJECTED and any(
        isinstance(e, dict) and parse_verdict(e.get("verdict")) == Verdict.APPROVED
        for e in decisions.values()
    ):
        raise _bad(
            "top-level verdict is REJECTED but toolDecisions contains an APPROVED call; set the top-level "
            "verdict to APPROVED to mix per-call outcomes",
            "toolDecisions",
        )
    checked: dict[str, tuple[str, str | None]] = {}
    for call_id, entry in decisions.items():
        if call_id not in calls:
            raise _bad(
                f"no pending tool call '{call_id}'; pending: [{', '.join(calls)}]", f"toolDecisions.{call_id}"
            )
        checked[call_id] = _check_entry(call_id, entry, calls[call_id])
    for call_id, (_, amended) in checked.items():
        if amended is not None and amended != decisions[call_id].get("amendedArguments"):
            # the decision stores (and the continuation runs) the merged arguments, not the marker
            decisions[call_id] = {**decisions[call_id], "amendedArguments": amended}
    audit = []
    for call_id, call in calls.items():
        verdict, amended = checked.get(call_id, (decision.verdict, None))
        digest_source = amended if amended is not None else call.arguments_raw
        audit.append(
            {
                "callId": call_id,
                "toolName": call.tool_name,
                "verdict": verdict,
                "amended": amended is not None,
                "argsDigest": hashlib.sha256(digest_source.encode("utf-8")).hexdigest(),
            }
        )
    verdicts = {entry["verdict"] for entry in audit}
    summary = (
        "mixed" if len(verdicts) > 1 else (verdicts.pop().lower() if verdicts else decision.verdict.lower())
    )
    transaction.on_commit(lambda: metrics.count_tool_resume(summary))  # only if the decision commits
    return {"pauseType": "TOOL_CALL", "toolDecisions": audit, "toolVerdict": summary}
