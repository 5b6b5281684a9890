"""Parsing a decision body. Runs before anything is touched, so bad input never consumes a pause."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from approvals.body_rules import body_errors, shown_text
from approvals.errors import BadRequest
from approvals.field_errors import utf16_length
from approvals.models import Verdict

NOTE_MAX = 4096
VERDICT_REQUIRED = "Request body must include a 'verdict' field (APPROVED or REJECTED)"
# Accepted for compatibility with clients of the original, and ignored: the actor is the caller.
IGNORED_FIELDS = {"decidedBy"}
KNOWN_FIELDS = {"verdict", "note", "toolDecisions"} | IGNORED_FIELDS


@dataclass(frozen=True)
class DecisionInput:
    verdict: str
    note: str = ""
    tool_decisions: dict[str, Any] = field(default_factory=dict)


def parse_verdict(value: Any) -> str | None:
    """Trimmed and upper-cased; anything but APPROVED or REJECTED is no verdict."""
    if not isinstance(value, str):
        return None
    candidate = value.strip().upper()
    return candidate if candidate in (Verdict.APPROVED, Verdict.REJECTED) else None


def bad_verdict_message(value: Any) -> str:
    """What is wrong with a verdict that is there but is not APPROVED or REJECTED, naming the value."""
    if isinstance(value, str):
        return f"verdict '{shown_text(value, limit=40)}' must be APPROVED or REJECTED"
    kind = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}.get(
        type(value), "not a string")
    return f"verdict must be the string APPROVED or REJECTED, not {kind}"


def parse_decision_body(data: Any) -> DecisionInput:
    if not isinstance(data, dict):
        raise BadRequest(VERDICT_REQUIRED, errors=[{"field": "verdict", "message": "required"}])
    errors: list[dict[str, str]] = []
    unknown = sorted(set(data) - KNOWN_FIELDS)
    for name in unknown:
        errors.append({"field": name, "message": "unknown field"})
    raw_verdict = data.get("verdict")
    verdict = parse_verdict(raw_verdict)
    if raw_verdict is None:
        errors.append({"field": "verdict", "message": "required: APPROVED or REJECTED"})
    elif verdict is None:
        errors.append({"field": "verdict", "message": bad_verdict_message(raw_verdict)})
    note = data.get("note")
    if note is None:
        note = ""
    elif not isinstance(note, str):
        errors.append({"field": "note", "message": "must be a string"})
        note = ""
    elif utf16_length(note) > NOTE_MAX:
        errors.append({"field": "note", "message": f"exceeds the maximum length of {NOTE_MAX} characters"})
    else:
        errors.extend(body_errors(note, field="note"))
    tool_decisions = data.get("toolDecisions")
    if tool_decisions is None:
        tool_decisions = {}
    elif not isinstance(tool_decisions, dict):
        errors.append({"field": "toolDecisions", "message": "must be an object keyed by call id"})
        tool_decisions = {}
    else:
        errors.extend(body_errors(tool_decisions, field="toolDecisions"))
    if errors:
        if raw_verdict is None:
            detail = VERDICT_REQUIRED
        elif verdict is None:
            detail = bad_verdict_message(raw_verdict)
        elif any(e["field"] == "note" and "exceeds" in e["message"] for e in errors):
            detail = f"Decision note exceeds the maximum length of {NOTE_MAX} characters"
        else:
            detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        raise BadRequest(detail, errors=errors)
    return DecisionInput(verdict=verdict, note=note, tool_decisions=tool_decisions)
