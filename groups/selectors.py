"""Reads of groups: the list, one version of a group's document, a discussion behind its access rule, and a
group's discussions."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from approvals.access import is_admin, require_decider
from common.errors import NotFound
from groups.models import Group, GroupConversation, GroupVersion

GONE = "Group conversation not found."


def live_group(*, group_id: uuid.UUID | str) -> Group:
    """The group if it exists and is not deleted; NotFound otherwise (a malformed id included)."""
    try:
        key = group_id if isinstance(group_id, uuid.UUID) else uuid.UUID(str(group_id))
        return Group.objects.get(pk=key, deleted_at__isnull=True)
    except (Group.DoesNotExist, ValueError, TypeError):
        raise NotFound("Group not found.") from None


def group_version(*, group_id: uuid.UUID | str, version: int | None = None) -> GroupVersion:
    """One version of a live group's document, the latest without ``version``, in one query; NotFound as
    ``live_group`` for an unknown or deleted group."""
    key = _as_uuid(group_id)
    versions = GroupVersion.objects.filter(group_id=key, group__deleted_at__isnull=True)
    if version is not None:
        versions = versions.filter(version=version)
    row = versions.order_by("-version").first() if key is not None else None
    if row is None:
        live_group(group_id=group_id)  # unknown, malformed or deleted: NotFound
        raise NotFound(f"Group {group_id} has no version {version}.")
    return row


def discussion_version(discussion: GroupConversation) -> GroupVersion:
    """The version of its group's document a discussion runs on (kept when the group is deleted)."""
    return GroupVersion.objects.get(group_id=discussion.group_id, version=discussion.group_version)


@dataclass(frozen=True)
class GroupSummary:
    id: uuid.UUID
    name: str
    latest_version: int


def group_list() -> list[GroupSummary]:
    """The groups not deleted, by name, each with its latest version (every caller may list them)."""
    groups = Group.objects.filter(deleted_at__isnull=True).prefetch_related("versions").order_by("name")
    return [
        GroupSummary(
            id=group.id,
            name=group.name,
            latest_version=max((v.version for v in group.versions.all()), default=0),
        )
        for group in groups
    ]


def _as_uuid(value: object) -> uuid.UUID | None:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except (ValueError, TypeError):
        return None


def discussion_for_owner(*, user: object, group_id: object, discussion_id: object) -> GroupConversation:
    """A discussion its owner, an admin or an approver may read. No existence oracle: a malformed id, an
    unknown one and one of another group are refused alike (403 for a plain user, 404 for the roles that
    see every subject), exactly like someone else's discussion is to a plain user."""
    group_key, discussion_key = _as_uuid(group_id), _as_uuid(discussion_id)
    discussion = (
        GroupConversation.objects.filter(pk=discussion_key, group_id=group_key).first()
        if group_key is not None and discussion_key is not None
        else None
    )
    require_decider(
        user,
        exists=discussion is not None,
        owner_id=discussion.owner_id if discussion is not None else None,
        what="discussion",
    )
    assert discussion is not None  # nosec B101  # type narrowing: require_decider refused a missing one
    return discussion


def discussion_decided(discussion_id: object) -> GroupConversation:
    """The discussion a decision was just taken on, read afresh: 404 if it was deleted meanwhile (a
    discussion is deleted only once it stopped: groups.deletion)."""
    discussion = GroupConversation.objects.select_related("owner").filter(pk=discussion_id).first()
    if discussion is None:
        raise NotFound(GONE)
    return discussion


def latest_pause_reason(discussion: GroupConversation) -> str | None:
    """The note of the discussion's newest transcript entry that is its own (an ERROR: why a resumed
    leg did not start), or None."""
    for entry in reversed(discussion.transcript):
        if entry.get("member") is None:
            return entry.get("note")
    return None


def discussions_of_group(*, user: Any, group_id: object, index: int, limit: int) -> list[GroupConversation]:
    """A live group's discussions, newest first, ``limit`` of them from ``index``: an admin's every one, anyone
    else's their own (the owner scope is in the query, before the limit)."""
    group = live_group(group_id=group_id)
    discussions = GroupConversation.objects.filter(group=group).select_related("owner")
    if not is_admin(user):
        discussions = discussions.filter(owner_id=user.pk)
    return list(discussions.order_by("-created_at", "-id")[index : index + limit])
