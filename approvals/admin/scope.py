"""Who may use the admin inbox, and which pauses each reviewer sees there.

The same rule as every other surface (approvals.access): admins and approvers see and decide every
pause, any other staff member only the pauses of their own conversations. The admin adds one rule of
its own: it is for staff. The scope is part of the query, never a filter applied to fetched rows.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from approvals import access
from approvals.access import is_owner, sees_every_pause
from approvals.models import Pause, PauseStatus
from approvals.selectors import decidable_by


def may_use_inbox(user: Any) -> bool:
    return bool(user and user.is_authenticated and user.is_active and user.is_staff)


def scoped_pauses(user: Any, pauses: QuerySet[Pause]) -> QuerySet[Pause]:
    """``pauses`` narrowed, inside SQL, to those ``user`` may see and decide (any status)."""
    if not may_use_inbox(user):
        return pauses.none()
    return decidable_by(user, pauses)


def may_decide(user: Any, pause: Pause) -> bool:
    return may_use_inbox(user) and (sees_every_pause(user) or is_owner(user, pause.owner_id))


def may_read_turns(user: Any, pause: Pause) -> bool:
    """``approvals.access.may_read_turns``, for a reviewer who may decide ``pause`` in the inbox."""
    return may_decide(user, pause) and access.may_read_turns(
        user, owner_id=pause.owner_id, awaiting=pause.status == PauseStatus.PENDING
    )
