"""Groups: versioned documents naming the member agents and the phases of a discussion, and the
discussions run on them."""

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

    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="versions", db_index=False)
    version = models.PositiveIntegerField()
    document = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["group", "version"], name="group_version_unique")]

    def __str__(self) -> str:
        return f"{self.group_id} v{self.version}"


class DiscussionState(models.TextChoices):
    READY = "READY"
    IN_PROGRESS = "IN_PROGRESS"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


TERMINAL_STATES = (DiscussionState.COMPLETED, DiscussionState.FAILED, DiscussionState.CANCELLED)


class GroupConversation(models.Model):
    """One discussion of a group's members about a question, on the group version it started on.

    ``transcript`` holds the members' entries in order, ``tasks`` those of the EXECUTE phases, and
    ``member_conversations`` the 1:1 conversation each member talks through ({agentId: conversationId})."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="discussions")
    group_version = models.PositiveIntegerField()
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    question = models.TextField()
    state = models.CharField(max_length=32, choices=DiscussionState.choices, default=DiscussionState.READY)
    phase_index = models.PositiveIntegerField(default=0)
    turn_count = models.PositiveIntegerField(default=0)
    transcript = models.JSONField(default=list, blank=True)
    tasks = models.JSONField(default=list, blank=True)
    member_conversations = models.JSONField(default=dict, blank=True)
    # The turn count when the current turn budget began: a human's approval of a TASK pause grants a
    # fresh one (protocol.maxTurns counts from here), a system decision never does.
    budget_base = models.PositiveIntegerField(default=0)
    # The no-progress guard's fingerprint of the last TASK pause (groups.gates); cleared at the end.
    last_pause_fingerprint = models.CharField(max_length=2000, blank=True, default="")
    # The lease of the process running the discussion, renewed by its heartbeat: an IN_PROGRESS
    # discussion whose lease ran out, with no open pause, was abandoned by a dead process.
    turn_alive_until = models.DateTimeField(null=True, blank=True)
    # A cancel of a running discussion: it stops before its next member turn (groups.cancels).
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_by = models.CharField(max_length=191, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["owner", "created_at"], name="discussion_owner"),
            models.Index(
                fields=["turn_alive_until"],
                condition=models.Q(state="IN_PROGRESS"),
                name="discussion_running",
            ),
        ]

    def __str__(self) -> str:
        return f"discussion {self.id} ({self.state})"
