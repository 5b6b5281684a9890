"""Group services: versioned documents, validated whole on every write (docs/groups.md)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from conversations.agents import report_or_raise
from groups.group_document import validate_group_document
from groups.models import Group, GroupVersion
from groups.selectors import live_group


@transaction.atomic
def create_group(*, document: dict[str, Any], created_by: Any = None) -> GroupVersion:
    report_or_raise(document, validate=validate_group_document)
    group = Group.objects.create(name=document["name"], created_by=created_by)
    return GroupVersion.objects.create(group=group, version=1, document=document)


@transaction.atomic
def update_group(*, group_id: uuid.UUID | str, document: dict[str, Any]) -> GroupVersion:
    """A new version; the versions before it stay as they were. A running discussion keeps the version it
    started on; a paused one moves to the latest when it resumes (groups.discussion_continuation checks it still fits)."""
    report_or_raise(document, validate=validate_group_document)
    group = Group.objects.select_for_update().filter(pk=live_group(group_id=group_id).pk).get()
    latest = GroupVersion.objects.filter(group=group).aggregate(v=Max("version"))["v"] or 0
    group.name = document["name"]
    group.save(update_fields=["name"])
    return GroupVersion.objects.create(group=group, version=latest + 1, document=document)


@transaction.atomic
def delete_group(*, group_id: uuid.UUID | str) -> None:
    """Soft delete: the group leaves the list and its reads answer 404; its versions are kept."""
    group = live_group(group_id=group_id)
    group.deleted_at = timezone.now()
    group.save(update_fields=["deleted_at"])
