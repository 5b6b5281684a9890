"""A decision's move of its conversation back to running, as one statement (decision record 0006).

The compare-and-set AWAITING_HUMAN -> IN_PROGRESS (the turn's start and lease, no cancel), the lock on
the conversation's audit head, which the decision's entry appends to next, and the paused turn's
window of steps, which a continuation in the decision's own transaction starts from. The head is
locked after the conversation's row, as when the entry locked it itself; the window is read through the
(conversation, index) index from the step count the update answers, as ``step_store.newest_steps``
reads it.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from datetime import datetime

from approvals.audit import lock_head_sql, locked_head_from
from approvals.models import AuditHead, SubjectType
from common import rows
from conversations.models import Conversation, ConversationState, ConversationStep
from conversations.step_store import WITHOUT_PROPERTIES, memory_window, window_join

S = ConversationState


@dataclass(frozen=True)
class PausedTurn:
    """What the statement read: the conversation's audit head, locked, and the paused turn's window (the
    newest ``memory_window() + 1`` live steps, oldest first, without their ``properties``)."""

    head: AuditHead
    window: list[ConversationStep]


def begin_paused_turn(
    conversation_id: uuid.UUID, *, started: datetime, alive_until: datetime
) -> PausedTurn | None:
    """The compare-and-set and the reads above, in the caller's transaction (PostgreSQL); None when the
    conversation was not AWAITING_HUMAN (nothing written, nothing locked but the row it looked at)."""
    found = rows.fetch_all(
        _begin_sql(),
        [S.IN_PROGRESS, started, alive_until, conversation_id, S.AWAITING_HUMAN, memory_window() + 1],
    )
    if not found:
        return None
    head = locked_head_from(SubjectType.CONVERSATION, conversation_id, found[0][:3])
    window = rows.instances(
        ConversationStep, [row[3:] for row in found if row[3] is not None], WITHOUT_PROPERTIES
    )
    return PausedTurn(head, window)


@functools.cache
def _begin_sql() -> str:
    subject = SubjectType.CONVERSATION.value
    window = window_join("c.subject_id", 'c."step_count"')
    return (
        f'WITH c AS (UPDATE {rows.table(Conversation)} SET "state" = %s, "turn_started_at" = %s, '  # nosec B608  # identifiers from model metadata, values are parameters
        f'"turn_alive_until" = %s, "cancel_requested_at" = NULL, "cancel_requested_by" = \'\' '
        f'WHERE "id" = %s AND "state" = %s RETURNING \'{subject}\' AS subject_type, "id" AS subject_id, "step_count"), '
        f"head AS ({lock_head_sql('c')}) "
        f"SELECT head.id, head.last_sequence, head.last_hash, "
        f"{rows.select_list(ConversationStep, 's', WITHOUT_PROPERTIES)} FROM c CROSS JOIN head "
        f'{window} ORDER BY s."index"'
    )
