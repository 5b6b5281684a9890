"""At most once for the http calls a continuation runs: the steps of the execution journal.

A continuation of a decided pause (a RULE pause approved, or the turn going on after a TOOL_CALL pause)
runs the rest of its turn, and an ``httpcalls`` task's call there is a side effect. A process killed
mid-way leaves the pause to recovery, which puts it back to PENDING with the same epoch; a second
approval runs the same continuation again. So each such call is a step of the execution journal
(toolgate.gate.journal: one row per pause epoch and step key, the tool calls' own table):

- **claim** before anything of the call runs: an insert committed on its own, before the request is built;
- **record** its result, and the properties its instructions wrote, once it returns;
- a later run of the same continuation of the same pause finds the claim: a recorded step **replays** its
  result and property writes and is never sent again; a step claimed but never recorded (the process died
  while it was in flight) is **not sent again** either: its result is ``OUTCOME_UNKNOWN``, audited
  ``hitl.step.outcome_unknown``, and until then the pause shows it (``outcome_unknown_steps``).

The rule lives in ``journaled``; what a step shows (``outcome_unknown_steps``) is allow-listed and redacted:
the call's name, its declared method and path template, when it was claimed; never a header or a body.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from approvals.audit import append_audit_entry
from approvals.models import Pause, SubjectType
from approvals.pause_summaries import iso
from toolgate.gate import journal
from toolgate.models import JournalEntry, JournalStatus, JournalStepKind
from toolgate.outbound.redaction import redact

logger = logging.getLogger(__name__)

OUTCOME_UNKNOWN_TEXT = (
    "outcome unknown: an earlier run of this continuation sent this call and died before its result was "
    "recorded; it is not sent again"
)

# (name, value, scope) as CallEffects.set_property takes them
PropertyWrite = tuple[str, Any, str]


@dataclass(frozen=True)
class Continuing:
    """The decided pause whose continuation this turn is (``TurnContext.continuing``): its steps are
    journaled under the pause's epoch, which survives a restore to PENDING."""

    pause_id: uuid.UUID
    pause_epoch: uuid.UUID
    subject_id: uuid.UUID
    subject_type: str
    decided_by: str

    @classmethod
    def of(cls, pause: Pause) -> Continuing:
        return cls(pause.id, pause.epoch, pause.subject_id, pause.subject_type, pause.decided_by)


def step_key(task: dict[str, Any], call: dict[str, Any]) -> str:
    """One key per call of one task: a turn runs each task once, so a second run finds the same key."""
    return f"http:{task.get('id') or ''}:{call.get('name') or ''}"


def declared_target(call: dict[str, Any]) -> tuple[str, str]:
    """The call's method and path as declared (templates, never rendered values), redacted and capped."""
    request = call.get("request") if isinstance(call.get("request"), dict) else {}
    method = redact(str(request.get("method") or "GET")).upper()[:16]
    return method, redact(str(request.get("path") or ""))[:500]


def journaled(
    continuing: Continuing,
    task: dict[str, Any],
    call: dict[str, Any],
    *,
    set_property: Callable[[str, Any, str], None] | None,
    run: Callable[[Callable[[str, Any, str], None] | None], dict[str, Any]],
) -> dict[str, Any]:
    """The at-most-once rule for a continuation's http call: claim first (committed), then ``run`` it
    with a ``set_property`` that also remembers each write, then record; when an earlier run claimed it,
    replay what it recorded, or, if it recorded nothing, answer OUTCOME_UNKNOWN without sending."""
    key, name = step_key(task, call), str(call.get("name") or "")
    method, path = declared_target(call)
    if not journal.claim(
        conversation_id=continuing.subject_id,
        pause_epoch=continuing.pause_epoch,
        call_id=key,
        tool_name=name,
        decided_by=continuing.decided_by,
        step_kind=JournalStepKind.HTTP_CALL,
        method=method,
        path=path,
    ):
        return _earlier_attempt(continuing, key, name, method, path, set_property)
    writes: list[PropertyWrite] = []
    remembering = None
    if set_property is not None:

        def remembering(prop: str, value: Any, scope: str) -> None:
            writes.append((prop, value, scope))
            set_property(prop, value, scope)

    result = run(remembering)
    journal.mark_executed(
        pause_epoch=continuing.pause_epoch, call_id=key, result=_recorded_text(result, writes)
    )
    return result


def _earlier_attempt(
    continuing: Continuing,
    key: str,
    name: str,
    method: str,
    path: str,
    set_property: Callable[[str, Any, str], None] | None,
) -> dict[str, Any]:
    entry = journal.entry_for(pause_epoch=continuing.pause_epoch, call_id=key)
    if entry is not None and entry.status == JournalStatus.EXECUTED:
        recorded = _recorded(entry.result)
        if set_property is not None:
            for prop, value, scope in recorded.get("properties") or []:
                set_property(prop, value, scope)
        logger.info("http call %s of pause %s replayed from the journal", name, continuing.pause_id)
        return recorded.get("result") or {}
    logger.warning("hitl.step.outcome_unknown: call=%s pause=%s", name, continuing.pause_id)
    append_audit_entry(
        subject_type=continuing.subject_type,
        subject_id=continuing.subject_id,
        verb="hitl.step.outcome_unknown",
        actor="system:toolgate",
        automated=True,
        conversation_id=(
            continuing.subject_id if continuing.subject_type == SubjectType.CONVERSATION else None
        ),
        pause_id=continuing.pause_id,
        epoch=continuing.pause_epoch,
        detail={"step": name, "method": method, "path": path},
    )
    return {"error": OUTCOME_UNKNOWN_TEXT, "outcomeUnknown": True}


def _recorded_text(result: dict[str, Any], writes: list[PropertyWrite]) -> str:
    """The result and property writes as JSON, within the journal's cap; a body that does not fit is
    dropped (``bodyNotKept``) rather than cut into JSON that cannot be replayed."""
    text = json.dumps({"result": result, "properties": writes}, ensure_ascii=False, default=str)
    if len(text.encode("utf-8")) <= journal.RESULT_MAX_BYTES:
        return text
    slim = {key: value for key, value in result.items() if key != "body"} | {"bodyNotKept": True}
    return json.dumps({"result": slim, "properties": writes}, ensure_ascii=False, default=str)


def _recorded(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def outcome_unknown_steps(pause: Pause) -> list[dict[str, Any]]:
    """The http steps of the pause's earlier continuation runs that were claimed and never recorded, as
    the pause shows them (approval-status ``pauseDetails.outcomeUnknown``, the admin decision page)."""
    rows = (
        JournalEntry.objects.filter(
            pause_epoch=pause.epoch, status=JournalStatus.EXECUTING, step_kind=JournalStepKind.HTTP_CALL
        )
        .order_by("claimed_at")
        .values("tool_name", "method", "path", "claimed_at")
    )
    return [
        {
            "step": row["tool_name"],
            "method": row["method"],
            "path": row["path"],
            "claimedAt": iso(row["claimed_at"]),
        }
        for row in rows
    ]
