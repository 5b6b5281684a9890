"""What the end user and the model are told about a decision.

Rule: **an automated decision never claims a human.** A decision by a ``system:*`` actor (a timeout, the
no-progress guard) says plainly that it was made automatically: a timeout says that no reviewer decided
in time and which policy decided, any other automated decider is named. Only a human's rejection keeps
EDDI's wording, "This action was rejected by a human reviewer."
"""

from __future__ import annotations

from approvals.models import Pause, Verdict

HUMAN_REJECTION_TEXT = "This action was rejected by a human reviewer."
GUIDANCE_TEXT = "The reviewer declined and gave guidance: {note}"


def is_guidance(pause: Pause) -> bool:
    """A human's rejection whose note is an instruction (approvals.decision_input.guidance_decision)."""
    return bool((pause.decision_details or {}).get("guidance")) and not pause.automated and bool(pause.note)


TIMEOUT_DECIDER = "system:timeout"


def automated_decision_text(pause: Pause) -> str:
    """E.g. "No reviewer decided in time; the request was rejected automatically (policy AUTO_REJECT)."."""
    outcome = "approved" if pause.verdict == Verdict.APPROVED else "rejected"
    if pause.decided_by == TIMEOUT_DECIDER:
        return f"No reviewer decided in time; the request was {outcome} automatically (policy {pause.timeout_policy})."
    return f"The request was {outcome} automatically by {pause.decided_by}, not by a reviewer." + (
        f" Reason: {pause.note}" if pause.note else ""
    )


def rejection_text(pause: Pause) -> str:
    """The output a rejected rule pause posts instead of the rest of its turn."""
    if pause.automated:
        return automated_decision_text(pause)
    if is_guidance(pause):
        return f"{HUMAN_REJECTION_TEXT} {GUIDANCE_TEXT.format(note=pause.note)}"
    return HUMAN_REJECTION_TEXT + (f" Reason: {pause.note}" if pause.note else "")
