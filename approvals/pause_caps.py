"""The caps on pending pauses: one user's requests, or one agent's, can never fill every inbox.

A turn that could pause (a conversation's start or say, a group discussion's start, on every surface)
is refused before anything is written when the user who would own its pause already owns
``HITL_MAX_OPEN_PAUSES_PER_USER`` pending pauses (1:1 and group pauses alike), or its agent already has
``HITL_MAX_OPEN_PAUSES_PER_AGENT`` pending pauses; 0 turns a cap off. Both counts stop at the cap
(``LIMIT n``) on the partial indexes of pending pauses by owner and by agent, so they cost the same at a
million pending pauses as at a hundred. On PostgreSQL both are read by the statement that finds what the
turn runs on (``open_pause_columns``: a conversation's say reads them with the conversation and its
deployed version, a start with the version), or else by one statement of their own
(``open_pause_counts``).

The check and the turn's commit are not one transaction: turns that pass the check at the same moment
may all open their pause, so a cap can be overshot by the turns in flight at once. The per-user turn rate
(common/throttles.py) bounds how many that can be. docs/decisions/0008-a-reached-cap-is-a-409.md.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from approvals.models import Pause, PauseStatus
from common import rows
from common.errors import LimitReached

PER_USER = "HITL_MAX_OPEN_PAUSES_PER_USER"
PER_AGENT = "HITL_MAX_OPEN_PAUSES_PER_AGENT"


def counted_pending_pauses(*, cap: int, owner_id: Any = None, agent_id: Any = None) -> QuerySet:
    """The owner's (or else the agent's) pending pauses, at most ``cap`` of them, unevaluated. Selected and
    ordered by the columns of the partial index ``pause_pending_owner_inbox`` (``pause_pending_agent``):
    the index gives that order, so PostgreSQL reads its first ``cap`` entries alone, rather than scanning
    the table in the hope of meeting ``cap`` matching rows early (which it can misjudge by far)."""
    pending = Pause.objects.filter(status=PauseStatus.PENDING)
    if owner_id is not None:
        return pending.filter(owner_id=owner_id).order_by("paused_at").values("owner_id")[:cap]
    return pending.filter(agent_id=agent_id).order_by("paused_at").values("agent_id")[:cap]


@dataclass(frozen=True)
class OpenPauses:
    """The pending pauses a turn's caps count, read with what the turn runs on (``open_pause_columns``):
    the owner's up to ``HITL_MAX_OPEN_PAUSES_PER_USER``, the agent's up to
    ``HITL_MAX_OPEN_PAUSES_PER_AGENT``; 0 for a cap that is off."""

    user: int
    agent: int


# An SQL expression for the owner's id or the agent's, and the parameters it takes: a column of the
# statement's own row ('c."owner_id"', []), or a value ("%s", [owner_id]).
Operand = tuple[str, list[Any]]


def open_pause_columns(
    *, owner: Operand | None, agent: Operand | None, caps: tuple[int, int] | None = None
) -> tuple[str, list[Any]]:
    """Two select-list columns, the owner's pending pauses and the agent's, each counted up to its cap as
    ``counted_pending_pauses`` reads it (on its partial index), and the parameters they take, in order.
    ``caps``: (per user, per agent), the settings unless given. A count not asked (no operand, or its cap
    0) is the constant 0. ``OpenPauses(*values)`` reads them."""
    user_cap, agent_cap = caps if caps is not None else _caps()
    parts: list[str] = []
    params: list[Any] = []
    for operand, column, cap in ((owner, "owner_id", user_cap), (agent, "agent_id", agent_cap)):
        if operand is None or cap <= 0:
            parts.append("0")
            continue
        expression, operand_params = operand
        parts.append(
            f"(SELECT count(*) FROM (SELECT 1 FROM {rows.table(Pause)} p WHERE p.status = 'PENDING' "  # nosec B608  # identifiers from model metadata, values are parameters
            f"AND p.{column} = {expression} ORDER BY p.paused_at LIMIT %s) counted)"
        )
        params.extend([*operand_params, cap])
    return ", ".join(parts), params


def open_pause_counts(
    *, owner_id: Any, user_cap: int, agent_id: uuid.UUID | None, agent_cap: int
) -> tuple[int, int]:
    """(the owner's pending pauses up to ``user_cap``, the agent's up to ``agent_cap``); a count that is not
    asked (no owner or agent, a cap of 0) is 0. On PostgreSQL one statement, each count on its index as
    ``counted_pending_pauses`` reads it (tests/test_hand_written_sql.py runs both ways)."""
    user_asked = owner_id is not None and user_cap > 0
    agent_asked = agent_id is not None and agent_cap > 0
    if not (user_asked or agent_asked):
        return 0, 0
    if not rows.on_postgresql():
        return (
            counted_pending_pauses(cap=user_cap, owner_id=owner_id).count() if user_asked else 0,
            counted_pending_pauses(cap=agent_cap, agent_id=agent_id).count() if agent_asked else 0,
        )
    columns, params = open_pause_columns(
        owner=("%s", [owner_id]),
        agent=("%s", [agent_id]),
        caps=(user_cap if user_asked else 0, agent_cap if agent_asked else 0),
    )
    found = rows.fetch_one(f"SELECT {columns}", params)  # nosec B608  # constant SQL, values are parameters
    return (found[0], found[1]) if found is not None else (0, 0)


def require_room_for_a_pause(
    *, owner_id: Any, agent_id: Any = None, for_other: bool = False, counted: OpenPauses | None = None
) -> None:
    """A turn that could pause runs only while its owner has fewer pending pauses than
    ``HITL_MAX_OPEN_PAUSES_PER_USER`` and its agent (``agent_id``; None for a group discussion, whose pauses
    belong to no agent) fewer than ``HITL_MAX_OPEN_PAUSES_PER_AGENT``; otherwise ``LimitReached`` (409)
    naming the setting and its value. ``for_other``: the caller acts in someone else's conversation (an
    admin), so the refusal speaks of the owner, not of "you". ``counted``: the counts as the statement that
    found what the turn runs on read them (``open_pause_columns``, the same owner and agent); without
    them, one statement reads them here."""
    per_user, per_agent = _caps()
    agent_key = _as_uuid(agent_id)
    if counted is not None:
        user_open, agent_open = counted.user, counted.agent
    else:
        user_open, agent_open = open_pause_counts(
            owner_id=owner_id, user_cap=per_user, agent_id=agent_key, agent_cap=per_agent
        )
    if per_user > 0 and user_open >= per_user:
        whose = "The conversation's owner already has" if for_other else "You already have"
        raise LimitReached(
            f"{whose} {per_user} pending approvals, the most one user may have "
            f"({PER_USER}={per_user}): nothing was started or said. Ask a reviewer to decide them, or "
            "cancel some, and try again.",
            setting=PER_USER,
            limit=per_user,
        )
    if per_agent > 0 and agent_open >= per_agent:
        raise LimitReached(
            f"Agent {agent_key} already has {per_agent} pending approvals, the most one agent may have "
            f"({PER_AGENT}={per_agent}): nothing was started or said. Try again once reviewers have "
            "decided some.",
            setting=PER_AGENT,
            limit=per_agent,
        )


def _caps() -> tuple[int, int]:
    return settings.HITL_MAX_OPEN_PAUSES_PER_USER, settings.HITL_MAX_OPEN_PAUSES_PER_AGENT


def _as_uuid(value: Any) -> uuid.UUID | None:
    if value is None or isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None
