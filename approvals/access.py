"""Who may do what: admin and approver roles, ownership, and the no-existence-oracle rule.

Authorization is always on and denies by default. Every surface (REST, admin, MCP, Slack) asks here.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from approvals.models import PauseStatus
from common.errors import Forbidden, NotFound


def remember_group_names(user: Any, names: Any) -> None:
    """The user's group names as read with the user (approvals.authentication): no query of their own."""
    user._hitl_group_names = set(names)


def _group_names(user: Any) -> set[str]:
    cached = getattr(user, "_hitl_group_names", None)
    if cached is None:
        cached = set(user.groups.values_list("name", flat=True)) if user.is_authenticated else set()
        user._hitl_group_names = cached
    return cached


def group_names(user: Any) -> set[str]:
    """The names of the Django groups ``user`` is in, read once per request."""
    return _group_names(user)


def is_service_account(user: Any) -> bool:
    """A service account (role ``agent``, the group ``HITL_AGENT_GROUP``): an agent running elsewhere that
    files approval requests and reads, claims and reports on its own. It never decides anything and uses
    nothing else: no other role counts for it, even if someone also put it in a role's group."""
    if not user or not user.is_authenticated:
        return False
    return settings.HITL_AGENT_GROUP in _group_names(user)


def is_staff_member(user: Any) -> bool:
    """Django's staff flag, which never counts for a service account."""
    return bool(getattr(user, "is_staff", False)) and not is_service_account(user)


def is_admin(user: Any) -> bool:
    if not user or not user.is_authenticated or not user.is_active or is_service_account(user):
        return False
    return bool(user.is_superuser) or settings.HITL_ADMIN_GROUP in _group_names(user)


def is_approver(user: Any) -> bool:
    if not user or not user.is_authenticated or not user.is_active or is_service_account(user):
        return False
    return settings.HITL_APPROVER_GROUP in _group_names(user)


def sees_every_pause(user: Any) -> bool:
    """Admins and approvers see and decide every pause; everyone else only their own."""
    return is_admin(user) or is_approver(user)


def sees_what_runs(user: Any, pause: Any) -> bool:
    """A reviewer deciding a pause sees every byte the model controls in what will run (a tool call's
    arguments and request exactly as sent, a credential-shaped value included, with a warning): an
    admin or approver, while the pause waits. Everyone else, and everyone once it is decided, gets the
    redacted view (``toolgate.gate.pause_details``). Values the service injects from secret references
    are named in both, never shown."""
    return sees_every_pause(user) and pause is not None and pause.status == PauseStatus.PENDING


def may_use_inbox(user: Any) -> bool:
    """The admin inbox is for active staff; which pauses each of them sees there is ``sees_every_pause``'s rule."""
    return bool(
        user and user.is_authenticated and user.is_active and user.is_staff and not is_service_account(user)
    )


def is_owner(user: Any, owner_id: int | None) -> bool:
    return bool(user and user.is_authenticated and owner_id is not None and owner_id == user.pk)


def may_read_turns(user: Any, *, owner_id: int | None, awaiting: bool) -> bool:
    """Of those who may decide a subject, admins and its owner may always read its turns; an approver only
    while it awaits a decision (``awaiting``). The one rule behind the snapshot, ``approval-status?detail=full``
    and the admin decision page."""
    return is_admin(user) or is_owner(user, owner_id) or awaiting


def require_full_status(user: Any, *, owner_id: int | None, awaiting: bool, subject: str) -> None:
    """The full approval status (``detail=full``: the subject's turns with its pause) follows
    ``may_read_turns``: an approver-only caller is refused it unless the subject awaits a decision, and
    is pointed to the summary. ``subject`` names the subject in the refusal."""
    if not may_read_turns(user, owner_id=owner_id, awaiting=awaiting):
        raise Forbidden(
            f"Full approval status is available to approvers only while the {subject} is awaiting "
            "approval - use the summary view"
        )


def no_access(what: str) -> Forbidden:
    """The one refusal for a subject the caller may not use: unknown, someone else's and ownerless alike.

    No existence oracle: status, code and detail are the same whichever it is, so the text cannot tell
    a probing user which ids exist.
    """
    return Forbidden(f"Access denied: no {what} with this id exists that you may access")


def _require_access(
    user: Any, *, exists: bool, owner_id: int | None, what: str, allowed_for_all: bool
) -> None:
    """The one access check: no existence oracle, ownerless subjects fail closed, owners pass.

    ``allowed_for_all`` says whether the caller's role (admin, or admin/approver) grants every subject.
    """
    if not exists:
        if sees_every_pause(user):
            raise NotFound(f"{what.capitalize()} not found.")
        raise no_access(what)
    if allowed_for_all:
        return
    if owner_id is None or not is_owner(user, owner_id):
        raise no_access(what)


def require_decider(user: Any, *, exists: bool, owner_id: int | None, what: str) -> None:
    """Owner, admin or approver may decide, cancel and read approval status.

    An unknown id is a 404 only for admins and approvers; anyone else gets 403, so a plain user cannot
    probe which ids exist. An ownerless subject is open to admins and approvers only (fail closed).
    """
    _require_access(user, exists=exists, owner_id=owner_id, what=what, allowed_for_all=sees_every_pause(user))


def require_owner_or_admin(user: Any, *, exists: bool, owner_id: int | None, what: str) -> None:
    """Using a subject as its owner (a conversation's say, undo, redo, end) is for its owner and admins only."""
    _require_access(user, exists=exists, owner_id=owner_id, what=what, allowed_for_all=is_admin(user))
