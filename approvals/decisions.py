"""Deciding, cancelling, restoring and finishing pauses: every transition is one compare-and-set.

A decision moves the Pause PENDING -> RESOLVING, the subject to running, writes the audit entry and
either claims the continuation for the deciding process (approvals.continuation_runs) or enqueues it on
django-q2 (ORM broker), all in one transaction. The loser of any race
gets WrongState (409); bad input was rejected before, so it never consumes a pause.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django_q.tasks import async_task

from approvals import metrics, notices
from approvals.actors import Actor
from approvals.audit import AuditDraft, append_audit_entry, append_draft, audit_draft
from approvals.decision_input import DecisionInput
from approvals.engines import EngineHandler, Resumed, handler_for
from approvals.leases import lease_expiry
from approvals.models import Pause, PauseKind, PauseStatus, Verdict, Vote
from approvals.pause_kinds import decision_validator_for
from approvals.routing import refuse_unrouted
from approvals.self_approval import refuse_self_approval
from approvals.settlements import announce_settled, settlement_probes
from approvals.timer_arming import DecisionWrite, arm_timer, decision_write, disarm_timer, fire_retry_after
from approvals.votes import Tally, record_vote, takes_votes
from common import rows
from common.errors import BadRequest, LostRace, WrongState

CONTINUATION_TASK = "approvals.continuation_runs.run_continuation"
REPLY_WITH_GUIDANCE = "reply_with_guidance"  # the audit detail's reviewerAction of a guidance decision


def open_pause_of(subject_type: str, subject_id: uuid.UUID) -> Pause | None:
    """The subject's pending pause, with its owner (the decision's audit names them)."""
    if not rows.on_postgresql():
        return (
            Pause.objects.filter(subject_type=subject_type, subject_id=subject_id, status=PauseStatus.PENDING)
            .select_related("owner")
            .order_by("-paused_at")
            .first()
        )
    return _pause_with_owner(_PENDING_OF_SUBJECT, [subject_type, subject_id, PauseStatus.PENDING])


def pause_with_owner(pause_id: Any) -> Pause | None:
    """A pause by id, with its owner; None if there is none."""
    if not rows.on_postgresql():
        return Pause.objects.select_related("owner").filter(pk=pause_id).first()
    return _pause_with_owner(_BY_ID, [pause_id])


# what follows WHERE: the condition, and for a subject its newest pending pause
_PENDING_OF_SUBJECT = (
    'p."subject_type" = %s AND p."subject_id" = %s AND p."status" = %s ORDER BY p."paused_at" DESC LIMIT 1'
)
_BY_ID = 'p."id" = %s'


def _pause_with_owner(after_where: str, params: list[Any]) -> Pause | None:
    found = rows.fetch_one(_pause_with_owner_sql(after_where), params)
    return None if found is None else pause_and_owner(found)


def pause_with_owner_columns(pause: str, owner: str) -> str:
    """The select list of a pause (alias ``pause``) and its owner (alias ``owner``), for a query that
    reads a pause with something else; ``pause_and_owner`` builds them from its values."""
    return f"{rows.select_list(Pause, pause)}, {rows.select_list(get_user_model(), owner)}"


def pause_and_owner(values: Sequence[Any]) -> Pause | None:
    """The pause, its owner cached on it, from the values of ``pause_with_owner_columns``; None when a
    LEFT JOIN matched no pause (its values all NULL)."""
    user_model = get_user_model()
    pause_values, owner_values = rows.split(values, rows.width(Pause), rows.width(user_model))
    if rows.nothing_in(pause_values):
        return None
    pause = rows.instance(Pause, pause_values)
    owner = None if rows.nothing_in(owner_values) else rows.instance(user_model, owner_values)
    Pause._meta.get_field("owner").set_cached_value(pause, owner)
    return pause


@functools.cache
def _pause_with_owner_sql(after_where: str) -> str:
    return (
        f"SELECT {pause_with_owner_columns('p', 'u')} FROM {rows.table(Pause)} p "  # nosec B608  # identifiers from model metadata, values are parameters
        f'LEFT JOIN {rows.table(get_user_model())} u ON u."id" = p."owner_id" WHERE {after_where}'
    )


def _not_awaiting(surface: str, subject_id: uuid.UUID, what: str, *, lost_race: bool = False) -> WrongState:
    """Nothing pending to decide; ``lost_race``: it was pending when read, another decision won first."""
    state = handler_for(surface).subject_state(subject_id)
    return (LostRace if lost_race else WrongState)(
        f"{what} is not in a resumable state (current state: {state}) - it may have been resumed, "
        "cancelled, or timed out already.",
        current_state=state,
    )


@dataclass(frozen=True)
class Decided:
    """What ``record_decision`` did: the decided pause (RESOLVING, as the compare-and-set wrote it),
    whether this process claimed its continuation (``claimed_here``: it must run it, else the q-cluster
    will), and what the engine's check read (``check_can_continue``) for that continuation to reuse
    (None unless claimed here); or, for one approval among the several a pause needs, the votes so far
    (``tally``) with nothing decided."""

    pause: Pause
    claimed_here: bool
    checked: object | None = None
    # A vote that left the pause waiting for more approvals (approvals.votes): the pause is still PENDING.
    tally: Tally | None = None
    # What the engine's begin_resume read for the continuation (None unless claimed here).
    held: object | None = None


def decide_pause(
    *,
    surface: str,
    subject_type: str,
    subject_id: uuid.UUID,
    decision: DecisionInput,
    actor: Actor,
    expected_pause_id: uuid.UUID | None = None,
    what: str | None = None,
    subject: object | None = None,
) -> Pause:
    """Record a human or automated decision on the subject's pending pause and queue its continuation for
    the q-cluster. ``subject``: see ``record_decision``; a process that runs the continuation itself
    decides with ``approvals.continuation_runs.decide_and_continue``.

    Fails with WrongState when nothing is pending (or another decision won), with Forbidden when the
    pause forbids this actor to decide it (separation of duties), and with the engine's own error
    (an ApplicationError of its own) when the decision could not be carried out; either way nothing changes.
    """
    return record_decision(
        surface=surface,
        subject_type=subject_type,
        subject_id=subject_id,
        decision=decision,
        actor=actor,
        expected_pause_id=expected_pause_id,
        what=what,
        subject=subject,
    ).pause


def record_decision(
    *,
    surface: str,
    subject_type: str,
    subject_id: uuid.UUID,
    decision: DecisionInput,
    actor: Actor,
    expected_pause_id: uuid.UUID | None = None,
    what: str | None = None,
    continue_here: bool = False,
    continue_here_if_quick: bool = False,
    pending: Pause | None = None,
    subject: object | None = None,
    own_savepoint: bool = True,
) -> Decided:
    """``decide_pause``, and what it did (``Decided``).

    ``continue_here`` (with ``HITL_CONTINUE_INLINE`` on): the caller's process claims the continuation in
    this transaction instead of queueing it, with a short lease, and must run it right after the commit
    (``approvals.continuation_runs.decide_and_continue`` does both): if the process dies first, the lease
    expires and recovery restores the pause.

    ``continue_here_if_quick``: claim it here only when the engine says its continuation takes
    milliseconds (``continues_quickly``: nothing it runs leaves the process); else queue it. A timer
    decides this way, so a slow continuation never delays the next deadline.

    ``pending``: the subject's pending pause as the caller has just read it (a timer), not read again;
    the compare-and-set on its status still decides whether this decision wins. ``subject``: the subject
    as the caller has just read it (its access check), for the engine's check to reuse
    (``check_can_continue``); the compare-and-sets still decide.

    ``own_savepoint=False``: inside a caller's transaction that ends with any exception raised here
    (``decide_and_continue``), no savepoint of its own is needed."""
    handler = handler_for(surface)
    with transaction.atomic(savepoint=own_savepoint):
        pause = pending if pending is not None else open_pause_of(subject_type, subject_id)
        if pause is None or (expected_pause_id is not None and pause.id != expected_pause_id):
            raise _not_awaiting(surface, subject_id, what or handler.subject_word)
        refuse_self_approval(pause=pause, actor=actor)
        refuse_unrouted(pause=pause, actor=actor)
        if decision.tool_decisions and pause.kind != PauseKind.TOOL_CALL:
            raise BadRequest(
                "toolDecisions is only valid for tool-call pauses",
                errors=[{"field": "toolDecisions", "message": "only valid for tool-call pauses"}],
            )
        if decision.task_approvals and pause.kind != PauseKind.TASK:
            raise BadRequest(
                "taskApprovals is only valid for TASK pauses of group discussions",
                errors=[{"field": "taskApprovals", "message": "only valid for TASK pauses"}],
            )
        if decision.amendments and pause.kind != PauseKind.ACTION:
            field_name = next(iter(decision.amendments))
            raise BadRequest(
                f"{field_name} is only valid for approval requests",
                errors=[{"field": field_name, "message": "only valid for approval requests"}],
            )
        validator = decision_validator_for(pause.kind)
        kind_detail = validator(pause, decision) if validator else {}
        tally = None
        if takes_votes(pause, decision, actor):  # one approval of several: the row locked, votes counted
            if not Pause.objects.select_for_update().filter(pk=pause.pk, status=PauseStatus.PENDING).exists():
                raise _not_awaiting(surface, subject_id, what or handler.subject_word, lost_race=True)
            tally = record_vote(pause, decision, actor)
            if tally.count < tally.required:
                return Decided(pause, claimed_here=False, tally=tally)
        checked = handler.check_can_continue(pause, subject)
        now = timezone.now()
        here = continues_inline() and (
            continue_here or (continue_here_if_quick and handler.continues_quickly(checked))
        )
        decided = {
            "status": PauseStatus.RESOLVING,
            "verdict": decision.verdict,
            "note": decision.note,
            "decided_by": actor.name,
            "decided_by_user_id": actor.user_id,
            "automated": actor.automated,
            "decided_at": now,
            "decision_details": decision.recorded_details() | ({"votes": tally.as_json()} if tally else {}),
            "lease_until": lease_expiry(now) if here else None,
        }
        # the compare-and-set, and the timer's schedule deleted when it won: one statement, which the
        # engine's move to running joins when it can, with the entry too
        write = decision_write(pause, where={"id": pause.pk, "status": PauseStatus.PENDING}, values=decided)
        entry = _decision_entry(
            pause, (subject_type, subject_id), surface, decision, actor, kind_detail, tally
        )
        resumed = _decided_and_resumed(handler, pause, checked, entry, write)
        if resumed is None:
            raise _not_awaiting(surface, subject_id, what or handler.subject_word, lost_race=True)
        _as_decided(pause, decided, actor)
        if resumed.appended is None:
            append_draft(entry, head=resumed.head)
        if not here:
            # named: a decision made on the timer cluster (a timeout) still continues on the work cluster
            async_task(
                CONTINUATION_TASK,
                str(pause.id),
                task_name=f"hitl-continue-{pause.id}",
                group="hitl",
                cluster=settings.Q_CLUSTER["name"],
            )
        transaction.on_commit(lambda: metrics.count_resume(surface))
        notices.on_decided(pause)
    return Decided(
        pause, claimed_here=here, checked=checked if here else None, held=resumed.held if here else None
    )


def _decided_and_resumed(
    handler: EngineHandler, pause: Pause, checked: object | None, entry: AuditDraft, write: DecisionWrite
) -> Resumed | None:
    """The decision's writes, then the engine's move of its subject to running; one statement when the
    engine joins the two (``begin_decided_resume``). None: the decision lost, or the subject was not
    awaiting it (the caller's transaction then fails whole)."""
    joined = getattr(handler, "begin_decided_resume", None)
    if joined is not None and write.parts:
        return joined(pause, checked, entry, write)
    return handler.begin_resume(pause, checked, entry) if write.run() else None


def _as_decided(pause: Pause, decided: dict[str, Any], actor: Actor) -> None:
    """The pause as the compare-and-set wrote ``decided``, without reading it back."""
    for field, value in decided.items():
        setattr(pause, field, value)
    if actor.user is not None:
        # the approved tool calls of a tool pause act as the decider: no need to load them
        pause.decided_by_user = actor.user


def _decision_entry(
    pause: Pause,
    subject: tuple[str, uuid.UUID],
    surface: str,
    decision: DecisionInput,
    actor: Actor,
    kind_detail: dict[str, Any],
    tally: Tally | None,
) -> AuditDraft:
    """The decision's ``hitl.approval`` entry, before its place in the subject's chain."""
    return audit_draft(
        subject_type=subject[0],
        subject_id=subject[1],
        verb="hitl.approval",
        actor=actor.name,
        automated=actor.automated,
        verdict=decision.verdict,
        note=decision.note,
        pause_id=pause.id,
        epoch=pause.epoch,
        detail={
            "pauseType": pause.kind,
            "surface": surface,
            "agentId": str(pause.agent_id) if pause.agent_id else None,
            "agentVersion": pause.agent_version,
            "owner": pause.owner.get_username() if pause.owner_id else None,
            **kind_detail,
            **({"reviewerAction": REPLY_WITH_GUIDANCE} if decision.guidance else {}),
            **({"approvedBy": [voter for voter, _ in tally.votes]} if tally else {}),
        },
    )


def continues_inline() -> bool:
    """Whether deciding processes run continuations themselves (off: a q-cluster-only deployment)."""
    return bool(settings.HITL_CONTINUE_INLINE)


def cancel_pending_pause(
    *, pause: Pause, actor: Actor, mode: str = "CANCEL_GRACEFUL", detail: dict[str, Any] | None = None
) -> bool:
    """End a pending pause without a decision (cancel, end of conversation, ABORT timeout, retention).

    Runs in the caller's transaction; returns False when the pause was no longer pending. ``detail``: what
    the caller adds to the audit entry (the admin's ``reviewerAction``).

    A cancel that lost leaves the pause unlocked: a compare-and-set that waited for a decision committing
    keeps the row locked although it changed nothing (PostgreSQL locks the new row version before it
    rechecks the condition), and a canceller that went on to stop the running turn then held the pause
    while waiting for the conversation that the continuation holds, which waits for the pause: a
    deadlock. Rolling the lost attempt's savepoint back releases the lock.
    """
    try:
        with transaction.atomic():
            won = Pause.objects.filter(pk=pause.pk, status=PauseStatus.PENDING).update(
                status=PauseStatus.CANCELLED,
                verdict=Verdict.CANCELLED,
                decided_by=actor.name,
                decided_by_user=actor.user_id,
                automated=actor.automated,
                decided_at=timezone.now(),
                resolved_at=timezone.now(),
                due_at=None,
            )
            if not won:
                raise _CancelLost
            pause.refresh_from_db()
            disarm_timer(pause)
            handler_for(pause.surface).on_cancelled(pause, mode=mode)
            append_audit_entry(
                subject_type=pause.subject_type,
                subject_id=pause.subject_id,
                verb="hitl.approval",
                actor=actor.name,
                automated=actor.automated,
                verdict=Verdict.CANCELLED,
                pause_id=pause.id,
                epoch=pause.epoch,
                detail={"mode": mode, "pauseType": pause.kind, "surface": pause.surface, **(detail or {})},
            )
            announce_settled(pause)
    except _CancelLost:
        return False
    return True


class _CancelLost(Exception):
    """Rolls back the savepoint of a cancel whose compare-and-set found the pause no longer pending."""


def restore_pause(*, pause_id: uuid.UUID | str, reason: str, allow_live_lease: bool = False) -> bool:
    """Put a decided pause whose continuation could not start back to PENDING, deadline unchanged (an
    overdue one is fired again after ``FAILED_FIRE_RETRY``, not at once: ``fire_retry_after``).

    A pause whose continuation was cancelled meanwhile is not restored: it ends cancelled (returns False).
    """
    with transaction.atomic():
        pause = Pause.objects.select_for_update().filter(pk=pause_id, status=PauseStatus.RESOLVING).first()
        if pause is None:
            return False
        if not allow_live_lease and pause.lease_until is not None and pause.lease_until >= timezone.now():
            return False  # a worker is still continuing it
        if pause.cancel_requested_at is not None:
            handler_for(pause.surface).on_cancelled(pause, mode="CANCEL_GRACEFUL")
            finish_pause(
                pause=pause,
                outcome="cancelled",
                detail={"cancelledBy": pause.cancel_requested_by, "reason": reason, "stoppedBefore": None},
            )
            return False
        previous = {"verdict": pause.verdict, "decidedBy": pause.decided_by}
        # a quorum is gathered again: the approvals of a decision that never ran are not a new one's
        # (each stays in the ledger as its hitl.vote entry)
        votes_cleared, _ = Vote.objects.filter(pause=pause).delete()
        disarm_timer(pause)
        now = timezone.now()
        Pause.objects.filter(pk=pause.pk).update(
            status=PauseStatus.PENDING,
            verdict="",
            note="",
            decided_by="",
            decided_by_user=None,
            automated=False,
            decided_at=None,
            decision_details={},
            lease_until=None,
            fire_claimed_until=fire_retry_after(pause, now),
            schedule_id=None,
        )
        pause.refresh_from_db()
        arm_timer(pause)
        handler_for(pause.surface).on_restored(pause)
        append_audit_entry(
            subject_type=pause.subject_type,
            subject_id=pause.subject_id,
            verb="hitl.restored",
            actor="system:recovery",
            automated=True,
            pause_id=pause.id,
            epoch=pause.epoch,
            detail={
                "reason": reason,
                "previousDecision": previous,
                "dueAt": pause.due_at.isoformat() if pause.due_at else None,
                **({"votesCleared": votes_cleared} if votes_cleared else {}),
            },
        )
    return True


@dataclass(frozen=True)
class Finishing:
    """``finish_pause``'s compare-and-set (RESOLVING -> RESOLVED) as a statement and its parameters
    (``finishing``), for a caller that runs it as a part of a statement of its own, then hands
    ``finish_pause`` whether it won and what ``probes`` answered; ``values``: what it writes;
    ``probes``: the settlement listeners' questions (``settlement_probes``), each an SQL boolean over the
    updated row, for the statement to return with it."""

    sql: str
    params: list[Any]
    values: dict[str, Any]
    probes: tuple[str, ...] = ()


def finishing(pause: Pause) -> Finishing:
    values = _finished_values()
    sql, params = rows.update_statement(Pause, where=_resolving(pause), values=values)
    return Finishing(sql, params, values, settlement_probes())


def _finished_values() -> dict[str, Any]:
    return {
        "status": PauseStatus.RESOLVED,
        "resolved_at": timezone.now(),
        "due_at": None,
        "lease_until": None,
    }


def _resolving(pause: Pause) -> dict[str, Any]:
    return {"id": pause.pk, "status": PauseStatus.RESOLVING}


def finish_pause(
    *,
    pause: Pause,
    outcome: str,
    detail: dict[str, Any] | None = None,
    finished: tuple[Finishing, bool, Sequence[bool] | None] | None = None,
) -> None:
    """RESOLVING -> RESOLVED once the continuation committed (in its transaction); a pause already
    finished is left alone and not audited again. ``finished``: the caller's statement already ran
    ``finishing(pause)``'s compare-and-set, whether it won, and what its probes answered (None: not
    asked; each listener then asks for itself)."""
    probed: Sequence[bool] | None = None
    if finished is None:
        values = _finished_values()
        won = bool(rows.update(Pause, where=_resolving(pause), values=values))
    else:
        values, won, probed = finished[0].values, finished[1], finished[2]
    if won:
        for field, value in values.items():  # as committed, without reading it back
            setattr(pause, field, value)
        announce_settled(pause, probed)
    if won and outcome != "completed":
        append_audit_entry(
            subject_type=pause.subject_type,
            subject_id=pause.subject_id,
            verb=f"hitl.continuation.{outcome}",
            actor="system:continuation",
            automated=True,
            pause_id=pause.id,
            epoch=pause.epoch,
            detail=detail or {},
        )
