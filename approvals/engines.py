"""How the core reaches the engines it knows nothing about.

conversations/ and groups/ register a handler for their engine in AppConfig.ready(); the core calls
it to move the subject's state in the same transaction as the Pause, and to run the continuation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from approvals.audit import AuditDraft
    from approvals.models import AuditEntry, AuditHead, Pause


class ContinuationNotStarted(Exception):
    """Raised by a handler before the continuation had any effect: the pause is restored."""


class ContinuationFailedInDecision(Exception):
    """Raised by a handler whose continuation, running in the decision's own transaction (``held`` given),
    failed in any way but the database being unavailable: before it started or after. Nothing of it is
    kept: the core rolls the decision back with it and decides again, the continuation then running
    after the decision's commit, whose own failure handling records the outcome (the failure kept with
    the decision, or the pause restored). The cause is the exception's ``__cause__``."""


@dataclass(frozen=True)
class Resumed:
    """What ``begin_resume`` did once it moved the subject from awaiting to running.

    ``head``: the subject's audit head, locked by the same statement after the subject's row, for the
    decision's audit entry (None: the core locks it itself). ``held``: what the statement also read for
    the continuation (opaque to the core), handed to ``continue_pause`` when the continuation runs in
    the decision's own transaction, where nothing can have changed it. ``appended``: the decision's
    audit entry, when the statement appended it on the head the engine's check read (then ``head`` is
    None and the core appends nothing)."""

    head: AuditHead | None = None
    held: object | None = None
    # the decision's audit entry, when the same statement appended it (``begin_resume``'s ``audit``)
    appended: AuditEntry | None = None


class EngineHandler(Protocol):
    subject_word: str
    """What the engine's subject is called in a refusal ("Conversation is not in a resumable state")."""

    def subject_state(self, subject_id: object) -> str | None:
        """The subject's current state, or None when it does not exist."""

    def check_can_continue(self, pause: Pause, subject: object | None = None) -> object | None:
        """Raise (the engine's own ApplicationError) when a decision could not be carried out; runs before the CAS.

        ``subject``: the subject as the deciding request's access check just read it (opaque to the core;
        None: read it here). Returns what the check read (e.g. the subject and its agent version), handed
        to ``continue_pause`` when the deciding process runs the continuation, so it is not read again."""

    def continues_quickly(self, checked: object | None) -> bool:
        """Whether the continuation whose check read ``checked`` is known to take milliseconds (nothing
        it runs leaves the process), so a timer's process may run it in place rather than queue it, and
        the deciding process runs it in the decision's own transaction."""

    def begin_resume(
        self, pause: Pause, checked: object | None = None, audit: AuditDraft | None = None
    ) -> Resumed | None:
        """Compare-and-set the subject from awaiting to running, in the caller's transaction; None when it
        was not awaiting (nothing written). ``checked``: what ``check_can_continue`` returned; ``audit``:
        the decision's entry, which the engine may append in its statement on the audit head its check
        read (``approvals.optimistic_audit``; ``Resumed.appended``), or leave to the core."""

    # Optional: ``begin_decided_resume(pause, checked, audit, decision)``, ``begin_resume`` joined to the
    # decision's own writes (``approvals.timer_arming.DecisionWrite``: its ``parts`` and ``params``) in one
    # statement that moves the subject only when the decision's compare-and-set won; None when either did
    # not. An engine without it has the decision's statement run first, then ``begin_resume``.

    def on_cancelled(self, pause: Pause, *, mode: str) -> None:
        """Move the subject out of its awaiting state after its pause was cancelled (same transaction)."""

    def on_restored(self, pause: Pause) -> None:
        """Move the subject back to awaiting after a continuation could not start (same transaction)."""

    def continue_pause(
        self, pause: Pause, checked: object | None = None, held: object | None = None
    ) -> object | None:
        """Run the continuation of a decided pause. Finishes the pause itself.

        ``checked``: what ``check_can_continue`` returned in the decision's transaction, when the deciding
        process runs it (None on a q-cluster worker: read afresh). ``held``: what ``begin_resume`` read
        (``Resumed.held``), when it runs in the decision's own transaction (else None); there it takes no
        savepoint, and any failure but the database's being unavailable is raised as
        ``ContinuationFailedInDecision``. Returns the subject as the continuation left it, for the
        caller's answer (opaque to the core; None when there is nothing to show)."""

    def renew_turn(self, subject_id: object, until: datetime) -> None:
        """Push the running turn's lease of the subject to ``until`` (the heartbeat of a continuation)."""

    def interrupt_stale_turns(self, *, now: datetime, older_than: datetime) -> int:
        """Crash recovery: running subjects with no open pause whose turn lease expired before ``now`` (or,
        without a lease, that started before ``older_than``) are interrupted."""

    def review_turns(self, pause: Pause, limit: int, *, until: datetime | None = None) -> list[dict]:
        """The subject's latest ``limit`` turns, oldest first, as ``{"input", "actions", "output"}`` dicts,
        for a reviewer deciding ``pause`` (the caller checks the reviewer may read them); ``until``: only
        the turns begun by then (what the reviewer who decided it may read afterwards)."""

    # Optional (approvals.admin.outlook asks with getattr; an engine without them shows no such line):

    def approve_steps(self, pause: Pause) -> list[str] | None:
        """Labels of what approving ``pause`` runs next (e.g. "notify → POST /notify"), allow-listed and
        redacted, never a secret or a raw header; None when the engine cannot say."""

    def latest_inputs(self, subject_ids: list[object]) -> dict[object, str]:
        """The latest input of each subject, in one query (the caller checks the reviewer may read it)."""


_HANDLERS: dict[str, EngineHandler] = {}


def register_engine(engine: str, handler: EngineHandler) -> None:
    _HANDLERS[engine] = handler


def handler_for(engine: str) -> EngineHandler:
    """The handler of a pause's engine (``Pause.surface``)."""
    try:
        return _HANDLERS[engine]
    except KeyError:
        raise LookupError(f"no handler registered for engine '{engine}'") from None


def registered_handlers() -> list[EngineHandler]:
    return list(_HANDLERS.values())
