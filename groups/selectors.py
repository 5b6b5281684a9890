"""Reads of groups: the list and one version of a group's document."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from approvals.errors import NotFound
from groups.models import Group, GroupVersion


def live_group(*, group_id: uuid.UUID | str) -> Group:
    """The group if it exists and is not deleted; NotFound otherwise (a malformed id included)."""
    try:
        key = group_id if isinstance(group_id, uuid.UUID) else uuid.UUID(str(group_id))
        return Group.objects.get(pk=key, deleted_at__isnull=True)
    except (Group.DoesNotExist, ValueError, TypeError):
        raise NotFound("Group not found.") from None


def group_version(*, group_id: uuid.UUID | str, version: int | None = None) -> GroupVersion:
    """One version of a live group's document, the latest without ``version``."""
    group = live_group(group_id=group_id)
    versions = GroupVersion.objects.filter(group=group)
    row = (
        versions.filter(version=version).first()
        if version is not None
        else versions.order_by("-version").first()
    )
    if row is None:
        raise NotFound(f"Group {group_id} has no version {version}.")
    return row


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
