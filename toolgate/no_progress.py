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

from approvals.models import Pause, TimeoutPolicy
from toolgate.batches import PendingBatch
from toolgate.models import PendingToolBatch
from toolgate.precedence import clamp_max_auto_approvals, on_no_progress


@dataclass(frozen=True)
class GuardTrip:
    guard: str  # "no_progress" | "auto_approve_cap"
    action: str  # WAIT_FOR_HUMAN | AUTO_REJECT | ABORT


def check_guard(batch: PendingBatch, resumed: Pause | None, previous: PendingToolBatch | None) -> GuardTrip | None:
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
