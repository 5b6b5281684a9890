"""Running the continuation of a decided pause: in the deciding process, or as a django-q2 task.

The deciding process claims the continuation in the decision's own transaction and runs it
(``run_claimed_continuation``): a quick one (``continues_quickly``: nothing it runs leaves the process)
in that same transaction, any other right after the commit, keeping its short lease alive with a
heartbeat (approvals.leases). A web worker answering ``resume?wait`` and the admin decision page always
do so (``decide_and_continue``); a timer, and a ``resume`` without ``?wait`` once its answer is sent,
only for a quick continuation (``decide_and_continue_later``). Everything else is handed to the
q-cluster (``run_continuation``), the durable backstop. Either way a claim whose lease ran out means the
process died: the pause goes back to PENDING, audited (approvals.recovery), and the continuation is
never run twice.

Task delivery is at-least-once, so the body starts with a claim: a pause is continued only while it is
RESOLVING and has never been claimed. A claim whose lease ran out means an earlier attempt died part
way (its worker was killed): running it again could repeat what it already did, so instead the pause
goes back to PENDING, audited, for a human to decide again. A continuation is never applied twice.

A cancel that lands after the decision is recorded on the pause (``cancel_requested_*``). One that
comes before any worker claimed the continuation takes the claim itself, so the continuation never
starts; one that comes later is honoured by the running continuation before its next task.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from approvals.actors import Actor
from approvals.decision_input import DecisionInput
from approvals.decisions import record_decision, restore_pause
from approvals.engines import ContinuationFailedInDecision, ContinuationNotStarted, handler_for
from approvals.leases import kept_alive, lease_expiry
from approvals.models import Pause, PauseStatus
from approvals.votes import Tally

logger = logging.getLogger(__name__)

INTERRUPTED = "an earlier continuation attempt was interrupted before it finished"


def claim_continuation(pause_id: str) -> Pause | None:
    claimed = Pause.objects.filter(
        pk=pause_id, status=PauseStatus.RESOLVING, lease_until__isnull=True
    ).update(lease_until=lease_expiry())
    if not claimed:
        return None
    return Pause.objects.select_related("owner", "raised_by", "decided_by_user").get(pk=pause_id)


def renew_continuation_lease(pause_id: uuid.UUID | str, until: datetime) -> int:
    return Pause.objects.filter(pk=pause_id, status=PauseStatus.RESOLVING).update(lease_until=until)


def continuation_kept_alive(pause: Pause) -> contextlib.ExitStack:
    """The claim of a running continuation and its subject's turn, kept alive as two leases the heartbeat
    renews in a transaction each. A renewal then holds one row lock at a time, so it never deadlocks with
    the continuation's own commit, which locks the subject and then the pause (renewing both in one
    transaction took them the other way round, and PostgreSQL could abort the commit as the deadlock's
    victim: the approved turn then failed for nothing)."""
    handler = handler_for(pause.surface)
    leases = contextlib.ExitStack()
    leases.enter_context(
        kept_alive(lambda until: renew_continuation_lease(pause.id, until), what=f"continuation {pause.id}")
    )
    leases.enter_context(
        kept_alive(lambda until: handler.renew_turn(pause.subject_id, until), what=f"turn of {pause.id}")
    )
    return leases


CONTINUED, RESTORED, QUEUED, CLAIMED, VOTED = "continued", "restored", "queued", "claimed", "voted"


@dataclass(frozen=True)
class Continued:
    """A decision and what became of its continuation: ``continued`` here, ``restored`` (it could not
    start; the pause is pending again), ``queued`` for the q-cluster, or ``claimed`` by this process to
    run once its answer is sent (``then`` runs it). ``subject`` is the subject as the continuation left
    it (the engine's own type; None unless continued, or nothing to show). ``voted``: one approval of
    several was recorded and nothing was decided yet (``tally`` says how many there are)."""

    pause: Pause
    outcome: str
    subject: object | None = None
    then: Callable[[], object] | None = None
    tally: Tally | None = None

    @property
    def continued_here(self) -> bool:
        return self.outcome == CONTINUED


def run_claimed_continuation(
    pause: Pause, checked: object | None = None, *, in_decision: bool = False, held: object | None = None
) -> Continued:
    """Continue a pause this process holds the claim of, keeping the claim (and the subject's turn) alive
    while it runs; a continuation that cannot start restores the pause. ``checked``: what the engine
    read to check the decision in this process (``record_decision``). ``in_decision``: it runs inside the
    decision's own, still open transaction (a quick one): nothing of it is visible to another process
    until it commits with the decision, so there is no lease to keep alive; ``held``: what the engine's
    ``begin_resume`` read in that transaction (``Decided.held``), used only there."""
    handler = handler_for(pause.surface)
    with contextlib.nullcontext() if in_decision else continuation_kept_alive(pause):
        try:
            subject = handler.continue_pause(pause, checked, held if in_decision else None)
        except ContinuationNotStarted as exc:
            logger.warning("continuation of pause %s could not start: %s", pause.id, exc)
            restore_pause(pause_id=pause.id, reason=str(exc), allow_live_lease=True)
            return Continued(pause, RESTORED)
    return Continued(pause, CONTINUED, subject)


def claim_for_cancel(*, pause_id: uuid.UUID | str, by: str, at: datetime) -> Pause | None:
    """A decided pause whose continuation no worker has claimed yet is cancelled before it starts.

    The canceller takes the claim (the same compare-and-set a worker makes), so exactly one of them
    wins: the continuation either never runs, or runs and sees the cancel request at its next task.
    """
    claimed = Pause.objects.filter(
        pk=pause_id, status=PauseStatus.RESOLVING, lease_until__isnull=True
    ).update(lease_until=lease_expiry(at), cancel_requested_at=at, cancel_requested_by=by)
    return Pause.objects.get(pk=pause_id) if claimed else None


def record_cancel_request(*, pause_id: uuid.UUID | str, by: str, at: datetime) -> bool:
    """A cancel that lands while the continuation runs is kept on the pause; the first canceller counts."""
    return bool(
        Pause.objects.filter(
            pk=pause_id, status=PauseStatus.RESOLVING, cancel_requested_at__isnull=True
        ).update(cancel_requested_at=at, cancel_requested_by=by)
    )


def decide_and_continue(
    *,
    surface: str,
    subject_type: str,
    subject_id: uuid.UUID,
    decision: DecisionInput,
    actor: Actor,
    expected_pause_id: uuid.UUID | None = None,
    what: str | None = None,
    subject: object | None = None,
    pending: Pause | None = None,
    only_if_quick: bool = False,
) -> Continued:
    """``decide_pause`` and its continuation in this process (when inline continuations are on; otherwise
    it is queued for the q-cluster). ``only_if_quick``: only a continuation the engine knows to take
    milliseconds runs here, any other is queued (a timer's decision). ``subject``, ``pending``: see
    ``record_decision``.

    A quick continuation (``continues_quickly``) runs in the decision's own transaction, with no savepoint:
    one commit holds the decision, its audit entry and the continued subject, and a process that dies half
    way leaves the pause pending, as if nobody had decided. A quick continuation that fails rolls the
    decision back with it (``ContinuationFailedInDecision``), and the decision is made again as for any
    other continuation: it commits, then the continuation runs under its lease and records its own
    failure, or restores the pause. Any other continuation runs right after the decision committed."""
    decide = {
        "surface": surface,
        "subject_type": subject_type,
        "subject_id": subject_id,
        "decision": decision,
        "actor": actor,
        "expected_pause_id": expected_pause_id,
        "what": what,
        "continue_here": not only_if_quick,
        "continue_here_if_quick": only_if_quick,
    }
    try:
        with transaction.atomic():
            decided = record_decision(**decide, subject=subject, pending=pending, own_savepoint=False)
            if decided.tally is not None:
                return Continued(decided.pause, VOTED, tally=decided.tally)
            if decided.claimed_here and handler_for(decided.pause.surface).continues_quickly(decided.checked):
                return run_claimed_continuation(
                    decided.pause, decided.checked, in_decision=True, held=decided.held
                )
    except ContinuationFailedInDecision as failed:
        logger.warning(
            "the continuation in the decision's transaction on %s %s failed (%s): deciding again, to "
            "continue after the commit",
            subject_type,
            subject_id,
            failed.__cause__,
        )
        # what the first attempt read, and changed in memory, is not reused: the decision reads afresh
        decided = record_decision(**decide)
    if decided.claimed_here:
        return run_claimed_continuation(decided.pause, decided.checked)
    return Continued(decided.pause, QUEUED)


def decide_and_continue_later(
    *,
    surface: str,
    subject_type: str,
    subject_id: uuid.UUID,
    decision: DecisionInput,
    actor: Actor,
    subject: object | None = None,
) -> Continued:
    """``decide_pause`` claiming a quick continuation (``EngineHandler.continues_quickly``) for this
    process: ``CLAIMED``, with ``then``, the function that runs it, for the caller to call once its answer
    is out (``HITL_CONTINUE_AFTER_RESPONSE``); ``QUEUED`` when it was queued instead (a slow one always
    is). A process that dies before it ran lets the lease expire: recovery restores the pause."""
    decided = record_decision(
        surface=surface,
        subject_type=subject_type,
        subject_id=subject_id,
        decision=decision,
        actor=actor,
        subject=subject,
        continue_here_if_quick=True,
    )
    if decided.tally is not None:
        return Continued(decided.pause, VOTED, tally=decided.tally)
    if not decided.claimed_here:
        return Continued(decided.pause, QUEUED)

    def run() -> object:
        try:
            return run_claimed_continuation(decided.pause, decided.checked)
        except Exception:  # the answer is sent: log; the pause's lease and recovery are the backstop
            logger.exception("continuation of pause %s after the response failed", decided.pause.id)
            return None

    return Continued(decided.pause, CLAIMED, then=run)


def decide_and_queue(
    *,
    surface: str,
    subject_type: str,
    subject_id: uuid.UUID,
    decision: DecisionInput,
    actor: Actor,
    subject: object | None = None,
    what: str | None = None,
) -> Continued:
    """``decide_pause`` with its continuation queued for the q-cluster: ``QUEUED``, or ``VOTED`` for one
    approval of several."""
    decided = record_decision(
        surface=surface,
        subject_type=subject_type,
        subject_id=subject_id,
        decision=decision,
        actor=actor,
        subject=subject,
        what=what,
    )
    if decided.tally is not None:
        return Continued(decided.pause, VOTED, tally=decided.tally)
    return Continued(decided.pause, QUEUED)


class ContinuationStillClaimed(RuntimeError):
    """Raised so django-q2 delivers the task again later: the claim may belong to a dead worker."""


def run_continuation(pause_id: str) -> str:
    pause = claim_continuation(pause_id)
    if pause is None:
        claimed = (
            Pause.objects.filter(pk=pause_id, status=PauseStatus.RESOLVING)
            .values_list("lease_until", flat=True)
            .first()
        )
        if claimed is None:
            return "skipped"  # finished, restored or cancelled meanwhile
        if claimed < timezone.now():
            return "restored" if restore_pause(pause_id=pause_id, reason=INTERRUPTED) else "skipped"
        # django-q2 re-delivers only after its retry time, by when a worker past its timeout was killed;
        # a lease still alive then is on the edge of expiring: try again rather than drop the task.
        raise ContinuationStillClaimed(f"the continuation of pause {pause_id} is still claimed")
    return run_claimed_continuation(pause).outcome
