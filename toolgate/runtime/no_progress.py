"""Loop protection for tool pauses decided by machines.

Automated approvals (``system:*`` deciders, such as a timeout) are counted per turn on the batch;
a human decision resets the count. Two rules, each applied when a turn pauses on tools again:

- **No progress**: after an automated approval the same calls (canonical-JSON fingerprint: argument
  order cannot disguise them) are gated again — the turn is looping.
- **Cap**: ``maxAutoApprovalsPerTurn`` is the most automated approvals a turn may receive; a pause that
  would be auto-approved once more is not (0 means never).

A trip applies ``onNoProgress``: WAIT_FOR_HUMAN (the new pause waits indefinitely), AUTO_REJECT (it is
rejected at once by ``system:no-progress``) or ABORT (cancelled by ``system:no-progress``). Trips are
audited and counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from approvals import metrics
from approvals.actors import system_actor
from approvals.audit import append_audit_entry
from approvals.decision_input import DecisionInput
from approvals.decisions import cancel_pending_pause, decide_pause
from approvals.models import Pause, SubjectType, TimeoutPolicy
from toolgate.gate.batches import PendingBatch
from toolgate.gate.precedence import clamp_max_auto_approvals, on_no_progress
from toolgate.models import PendingToolBatch


@dataclass(frozen=True)
class GuardTrip:
    guard: str  # "no_progress" | "auto_approve_cap"
    action: str  # WAIT_FOR_HUMAN | AUTO_REJECT | ABORT

    @property
    def decides_the_pause(self) -> bool:
        """AUTO_REJECT and ABORT end the new pause at once (WAIT_FOR_HUMAN only changes its deadline)."""
        return self.action in ("AUTO_REJECT", "ABORT")


def check_guard(
    batch: PendingBatch, resumed: Pause | None, previous: PendingToolBatch | None
) -> GuardTrip | None:
    """Set the batch's automated-approval count and say whether a guard trips (see module rules)."""
    automated = bool(resumed is not None and resumed.automated and resumed.verdict == "APPROVED")
    batch.auto_approve_count = (previous.auto_approve_count + 1) if (automated and previous) else 0
    action = on_no_progress(batch.effective_config)
    if automated and previous is not None and previous.fingerprint == batch.fingerprint:
        return GuardTrip("no_progress", action)
    would_auto_approve = batch.timeout_config.get("timeoutPolicy") == TimeoutPolicy.AUTO_APPROVE
    if would_auto_approve and batch.auto_approve_count >= clamp_max_auto_approvals(batch.effective_config):
        return GuardTrip("auto_approve_cap", action)
    return None


def wait_for_human_timeout(trip: GuardTrip | None, timeout_config: dict) -> dict:
    """The new pause's deadline: WAIT_FOR_HUMAN makes it wait indefinitely, whatever the rules said."""
    if trip is not None and trip.action == "WAIT_FOR_HUMAN":
        return {"timeoutPolicy": TimeoutPolicy.WAIT_INDEFINITELY, "approvalTimeout": ""}
    return timeout_config


def record_trip(pause: Pause, trip: GuardTrip, batch: PendingBatch) -> None:
    """Count and audit a trip, in the transaction that opens the pause it tripped on."""
    metrics.count_tool_guard(trip.guard)
    append_audit_entry(
        subject_type=SubjectType.CONVERSATION,
        subject_id=pause.subject_id,
        verb=f"hitl.tool.{trip.guard}",
        actor="system:no-progress",
        automated=True,
        conversation_id=pause.subject_id,
        pause_id=pause.id,
        epoch=pause.epoch,
        detail={
            "guard": trip.guard,
            "action": trip.action,
            "fingerprint": batch.fingerprint,
            "autoApproveCount": batch.auto_approve_count,
        },
    )


def act_on_trip(pause: Pause, trip: GuardTrip) -> None:
    """Reject or cancel the new pause as ``system:no-progress``; runs once the pause is committed (a
    decision is made on a committed pause, like any other)."""

    actor = system_actor("no-progress")
    if trip.action == "AUTO_REJECT":
        decide_pause(
            surface=pause.surface,
            subject_type=pause.subject_type,
            subject_id=pause.subject_id,
            decision=DecisionInput(
                verdict="REJECTED", note="Automatic reject-all: repeated tool-call pause made no progress"
            ),
            actor=actor,
            expected_pause_id=pause.id,
        )
    elif trip.action == "ABORT":
        cancel_pending_pause(pause=pause, actor=actor, mode="NO_PROGRESS_ABORT")
