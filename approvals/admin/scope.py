"""Who may decide a pause in the admin inbox, and read its turns there.

The same rule as every other surface (approvals.access): admins and approvers see and decide every
pause, any other staff member only the pauses of their own conversations. The admin adds one rule of
its own: it is for staff (``approvals.access.may_use_inbox``). Which pauses a reviewer's pages list is
``approvals.selectors.reviewable_pauses``: the scope is part of the query, never a filter applied to
fetched rows.
"""

from __future__ import annotations

from typing import Any

from approvals import access
from approvals.access import is_owner, may_use_inbox, sees_every_pause
from approvals.models import Pause, PauseStatus


def may_decide(user: Any, pause: Pause) -> bool:
    return may_use_inbox(user) and (sees_every_pause(user) or is_owner(user, pause.owner_id))


def decided_it(user: Any, pause: Pause) -> bool:
    """``user`` is the person who decided ``pause``, which no longer waits. They read its subject's turns
    afterwards as they were up to the decision (what they judged, and the turn the decision continued:
    what it went on to say), never a turn begun later; the rest of ``may_read_turns`` is unchanged."""
    return (
        pause.status != PauseStatus.PENDING
        and pause.decided_at is not None
        and pause.decided_by_user_id is not None
        and pause.decided_by_user_id == getattr(user, "pk", None)
        and may_decide(user, pause)
    )


def may_read_turns(user: Any, pause: Pause) -> bool:
    """``approvals.access.may_read_turns``, for a reviewer who may decide ``pause`` in the inbox."""
    return may_decide(user, pause) and access.may_read_turns(
        user, owner_id=pause.owner_id, awaiting=pause.status == PauseStatus.PENDING
    )
