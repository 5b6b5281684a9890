"""Agents (versioned documents, deployments) and 1:1 conversations with their steps."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class Environment(models.TextChoices):
    PRODUCTION = "production"
    TEST = "test"


class ConversationState(models.TextChoices):
    READY = "READY"
    IN_PROGRESS = "IN_PROGRESS"
    AWAITING_HUMAN = "AWAITING_HUMAN"
    ENDED = "ENDED"
    EXECUTION_INTERRUPTED = "EXECUTION_INTERRUPTED"
    ERROR = "ERROR"


class Agent(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.name


class AgentVersion(models.Model):
    """An immutable version of an agent document."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="versions", db_index=False)
    version = models.PositiveIntegerField()
    document = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "version"], name="agent_version_unique")]

    def __str__(self) -> str:
        return f"{self.agent_id} v{self.version}"


class Deployment(models.Model):
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="deployments", db_index=False)
    version = models.PositiveIntegerField()
    environment = models.CharField(max_length=16, choices=Environment.choices)
    deployed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "version", "environment"], name="deployment_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} v{self.version} in {self.environment}"


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="conversations")
    agent_version = models.PositiveIntegerField()
    environment = models.CharField(max_length=16, choices=Environment.choices)
    # No index of its own: "conversation_owner" (owner, created_at) leads with it.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    state = models.CharField(
        max_length=32, choices=ConversationState.choices, default=ConversationState.READY
    )
    properties = models.JSONField(default=dict, blank=True)
    context = models.JSONField(default=dict, blank=True)
    # When the running turn (state IN_PROGRESS) started: crash recovery leaves younger turns alone.
    turn_started_at = models.DateTimeField(null=True, blank=True)
    # The running turn's lease, renewed by its heartbeat (approvals.leases); expired = its process died.
    turn_alive_until = models.DateTimeField(null=True, blank=True)
    # A cancel (or end) of the running turn, committed on its own: the turn stops before its next task.
    # Cleared when the next turn starts.
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_by = models.CharField(max_length=191, blank=True, default="")
    # How many live steps: they are indexes 0..step_count-1, the undone ones follow. Kept with the
    # steps (conversations.step_store, undo/redo) so the newest steps are an index range of known
    # bounds, never a scan of all steps.
    step_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["owner", "created_at"], name="conversation_owner"),
            models.Index(fields=["state"], condition=Q(state="IN_PROGRESS"), name="conversation_in_progress"),
        ]

    def __str__(self) -> str:
        return f"conversation {self.id} ({self.state})"


class ConversationStep(models.Model):
    """One turn of a conversation: what the user said and what the pipeline made of it."""

    # No index of its own: the unique (conversation, index) leads with it.
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="steps", db_index=False
    )
    index = models.PositiveIntegerField()
    input = models.TextField(blank=True, default="")
    context = models.JSONField(default=dict, blank=True)
    actions = models.JSONField(default=list, blank=True)
    output = models.JSONField(default=list, blank=True)
    outputs = models.JSONField(default=dict, blank=True)
    data = models.JSONField(default=dict, blank=True)
    quick_replies = models.JSONField(default=list, blank=True)
    properties = models.JSONField(default=dict, blank=True)
    undone = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["conversation", "index"], name="step_index_unique")]
        ordering = ["index"]

    def __str__(self) -> str:
        return f"step {self.index} of {self.conversation_id}"


class AgentTrigger(models.Model):
    """EDDI's agent trigger: an intent and the agent deployments a managed conversation for it starts
    with (one picked at random when there are several). ``agent_deployments`` holds them as EDDI writes
    them: ``[{"environment", "agentId", "initialContext": {name: {"type", "value"}}}]``."""

    intent = models.CharField(max_length=100, unique=True)
    agent_deployments = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"trigger {self.intent}"


class ManagedConversation(models.Model):
    """The one conversation of a user for an intent (EDDI's user conversation): started from the intent's
    trigger, replaced once it has ended. ``conversation`` is null once that conversation was deleted."""

    intent = models.CharField(max_length=100)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["intent", "user"], name="managed_conversation_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.intent} of user {self.user_id}: {self.conversation_id}"
