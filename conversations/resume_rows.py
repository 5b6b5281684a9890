"""A decision's move of its conversation back to running, as one statement (decision record 0006).

The compare-and-set AWAITING_HUMAN -> IN_PROGRESS (the turn's start and lease, no cancel), the
decision's audit entry on the head the decision's access check read (``approvals.optimistic_audit``;
without one read, the lock on the conversation's audit head, which the decision's entry appends to
next), and the paused turn's window of steps, which a continuation in the decision's own transaction
starts from. The head is written or locked after the conversation's row, as when the entry locked it
itself; the window is read through the (conversation, index) index from the step count the update
answers, as ``step_store.newest_steps`` reads it.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from approvals.audit import lock_head_sql, locked_head_from
from approvals.models import AuditEntry, AuditHead, SubjectType
from approvals.optimistic_audit import SeenHead, appended_params, appended_parts, mark_appended
from approvals.timer_arming import DecisionWrite
from common import rows
from conversations.models import Conversation, ConversationState, ConversationStep
from conversations.step_store import WITHOUT_PROPERTIES, memory_window, window_join

S = ConversationState


@dataclass(frozen=True)
class PausedTurn:
    """What the statement read: the conversation's audit head, locked (None when the statement appended
    the decision's entry instead: ``appended``, or tried to and found the head moved), and the paused
    turn's window (the newest ``memory_window() + 1`` live steps, oldest first, without their
    ``properties``)."""

    head: AuditHead | None
    window: list[ConversationStep]
    appended: AuditEntry | None = None


def begin_paused_turn(
    conversation_id: uuid.UUID,
    *,
    started: datetime,
    alive_until: datetime,
    appending: tuple[SeenHead, AuditEntry] | None = None,
    decision: DecisionWrite | None = None,
) -> PausedTurn | None:
    """The compare-and-set and the reads above, in the caller's transaction (PostgreSQL); None when the
    conversation was not AWAITING_HUMAN (nothing written, nothing locked but the row it looked at).
    ``appending``: the head a read saw and the decision's entry on it, appended by the same statement
    instead of the head's lock (``approvals.optimistic_audit``; when the head had moved, neither).
    ``decision``: the decision's own writes (``approvals.timer_arming.decision_write``), first in the same
    statement; the conversation moves only when their compare-and-set won (None otherwise: what the
    decision wrote stays in the caller's transaction, which then fails whole)."""
    params: list[Any] = [*decision.params] if decision is not None else []
    params += [S.IN_PROGRESS, started, alive_until, conversation_id, S.AWAITING_HUMAN]
    if appending is not None:
        seen, entry = appending
        params += appended_params(seen, entry)
    sql = _begin_sql(
        None if appending is None else appending[0].exists, decision.parts if decision is not None else ""
    )
    found = rows.fetch_all(sql, [*params, memory_window() + 1])
    if not found:
        return None
    window = rows.instances(
        ConversationStep, [row[3:] for row in found if row[3] is not None], WITHOUT_PROPERTIES
    )
    if appending is not None:
        appended = found[0][0]
        return PausedTurn(None, window, None if appended is None else mark_appended(appending[1], appended))
    head = locked_head_from(SubjectType.CONVERSATION, conversation_id, found[0][:3])
    return PausedTurn(head, window)


@functools.cache
def _begin_sql(entry_on_head: bool | None = None, decision: str = "") -> str:
    """``entry_on_head`` (whether the seen head existed): the entry's parts instead of the lock; the first
    of the three head columns is then the entry's key (NULL: the head had moved). ``decision``: the
    decision's parts, first (its ``decided`` part answers a row when its compare-and-set won)."""
    subject = SubjectType.CONVERSATION.value
    window = window_join("c.subject_id", 'c."step_count"')
    if entry_on_head is None:
        head, columns, joined = (
            f"head AS ({lock_head_sql('c')})",
            "head.id, head.last_sequence, head.last_hash",
            "CROSS JOIN head",
        )
    else:
        head, columns, joined = (
            appended_parts(entry_on_head, "c"),
            "(SELECT id FROM appended), NULL, NULL",
            "",
        )
    won = " AND EXISTS (SELECT 1 FROM decided)" if decision else ""
    return (
        f'WITH {decision + ", " if decision else ""}c AS (UPDATE {rows.table(Conversation)} SET "state" = %s, "turn_started_at" = %s, '  # nosec B608  # identifiers from model metadata, values are parameters
        f'"turn_alive_until" = %s, "cancel_requested_at" = NULL, "cancel_requested_by" = \'\' '
        f'WHERE "id" = %s AND "state" = %s{won} RETURNING \'{subject}\' AS subject_type, "id" AS subject_id, "step_count"), '
        f"{head} "
        f"SELECT {columns}, "
        f"{rows.select_list(ConversationStep, 's', WITHOUT_PROPERTIES)} FROM c {joined} "
        f'{window} ORDER BY s."index"'
    )
