"""The caps on pending pauses: one user's requests, or one agent's, can never fill every inbox.

A turn that could pause (a conversation's start or say, a group discussion's start, on every surface)
is refused before anything is written when the user who would own its pause already owns
``HITL_MAX_OPEN_PAUSES_PER_USER`` pending pauses (1:1 and group pauses alike), or its agent already has
``HITL_MAX_OPEN_PAUSES_PER_AGENT`` pending pauses; 0 turns a cap off. Both counts stop at the cap
(``LIMIT n``) on the partial indexes of pending pauses by owner and by agent, so they cost the same at a
million pending pauses as at a hundred.

The check and the turn's commit are not one transaction: turns that pass the check at the same moment
may all open their pause, so a cap can be overshot by the turns in flight at once. The per-user turn rate
(hitl_project/throttles.py) bounds how many that can be. docs/decisions/0008-a-reached-cap-is-a-409.md.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from approvals.errors import LimitReached
from approvals.models import Pause, PauseStatus

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


def pending_pauses_reach(*, cap: int, owner_id: Any = None, agent_id: Any = None) -> bool:
    """Whether the owner's (or the agent's) pending pauses number ``cap`` or more."""
    return counted_pending_pauses(cap=cap, owner_id=owner_id, agent_id=agent_id).count() >= cap


def require_room_for_a_pause(*, owner_id: Any, agent_id: Any = None, for_other: bool = False) -> None:
    """A turn that could pause runs only while its owner has fewer pending pauses than
    ``HITL_MAX_OPEN_PAUSES_PER_USER`` and its agent (``agent_id``; None for a group discussion, whose pauses
    belong to no agent) fewer than ``HITL_MAX_OPEN_PAUSES_PER_AGENT``; otherwise ``LimitReached`` (409)
    naming the setting and its value. ``for_other``: the caller acts in someone else's conversation (an
    admin), so the refusal speaks of the owner, not of "you"."""
    per_user = settings.HITL_MAX_OPEN_PAUSES_PER_USER
    if per_user > 0 and owner_id is not None and pending_pauses_reach(cap=per_user, owner_id=owner_id):
        whose = "The conversation's owner already has" if for_other else "You already have"
        raise LimitReached(
            f"{whose} {per_user} pending approvals, the most one user may have "
            f"({PER_USER}={per_user}): nothing was started or said. Ask a reviewer to decide them, or "
            "cancel some, and try again.",
            setting=PER_USER,
            limit=per_user,
        )
    per_agent = settings.HITL_MAX_OPEN_PAUSES_PER_AGENT
    agent_key = _as_uuid(agent_id)
    if per_agent > 0 and agent_key is not None and pending_pauses_reach(cap=per_agent, agent_id=agent_key):
        raise LimitReached(
            f"Agent {agent_key} already has {per_agent} pending approvals, the most one agent may have "
            f"({PER_AGENT}={per_agent}): nothing was started or said. Try again once reviewers have "
            "decided some.",
            setting=PER_AGENT,
            limit=per_agent,
        )


def _as_uuid(value: Any) -> uuid.UUID | None:
    if value is None or isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None
