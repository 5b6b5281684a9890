"""Groups: versioned documents naming the member agents and the phases of a discussion."""

import uuid

from django.conf import settings
from django.db import models


class Group(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.name


class GroupVersion(models.Model):
    """An immutable version of a group document: a change is a new version."""

    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    document = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["group", "version"], name="group_version_unique")]

    def __str__(self) -> str:
        return f"{self.group_id} v{self.version}"
