"""The Slack adapter's own rows: integrations, thread -> conversation / discussion mappings, events seen,
deliveries made, discussion notices."""

import uuid

from django.conf import settings
from django.db import models


class SlackIntegration(models.Model):
    """One Slack app wired to one agent or one group (exactly one). Secrets are ``${vault:NAME}``
    references, never values."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=64, unique=True)
    agent = models.ForeignKey(
        "conversations.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    group = models.ForeignKey(
        "groups.Group", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    environment = models.CharField(max_length=16, default="production")
    # Whose conversations the Slack threads are, and whose access a Slack decision is checked with.
    run_as = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    signing_secret_ref = models.CharField(max_length=200)
    bot_token_ref = models.CharField(max_length=200)
    approval_channel = models.CharField(max_length=64, blank=True, default="")
    approver_user_ids = models.CharField(max_length=2000, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(agent__isnull=False, group__isnull=True)
                | models.Q(agent__isnull=True, group__isnull=False),
                name="slack_integration_agent_xor_group",
            ),
        ]

    def __str__(self) -> str:
        return f"slack integration {self.name}"


class SlackThread(models.Model):
    """A Slack thread and the conversation it talks to (a top-level message's ts keys its own thread);
    a group integration's thread has no conversation but its discussions (SlackDiscussion)."""

    integration = models.ForeignKey(
        SlackIntegration, on_delete=models.CASCADE, related_name="threads", db_index=False
    )
    channel = models.CharField(max_length=64)
    thread_ts = models.CharField(max_length=32)
    conversation = models.OneToOneField(
        "conversations.Conversation", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # The Slack user whose message started the latest turn (separation of duties for its pause).
    last_speaker = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["integration", "channel", "thread_ts"], name="slack_thread_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"slack thread {self.channel}/{self.thread_ts}"


class SlackEvent(models.Model):
    """An Events API delivery, kept by its event_id so Slack's retries are handled once."""

    event_id = models.CharField(max_length=64, unique=True)
    integration = models.ForeignKey(SlackIntegration, on_delete=models.CASCADE, related_name="+")
    message = models.JSONField(default=dict)
    handled = models.BooleanField(default=False)
    received_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"slack event {self.event_id}"


class DeliveryKind(models.TextChoices):
    APPROVAL_CARD = "approval_card"
    CONTINUATION = "continuation"


class DeliveryStatus(models.TextChoices):
    QUEUED = "QUEUED"  # a notice recorded, not yet tried
    SENDING = "SENDING"
    SENT = "SENT"
    FAILED = "FAILED"


class SlackDelivery(models.Model):
    """One message about one pause: claimed before it is sent, so no retry ever posts it twice."""

    pause_id = models.UUIDField()
    kind = models.CharField(max_length=24, choices=DeliveryKind.choices)
    integration = models.ForeignKey(SlackIntegration, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.SENDING)
    attempts = models.PositiveIntegerField(default=0)
    channel = models.CharField(max_length=64, blank=True, default="")
    ts = models.CharField(max_length=32, blank=True, default="")
    # The Slack user whose message raised the pause (approval cards): may not decide it when the pause
    # forbids self-approval.
    raised_by = models.CharField(max_length=32, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pause_id", "kind"], name="slack_delivery_once"),
        ]

    def __str__(self) -> str:
        return f"slack {self.kind} of pause {self.pause_id} ({self.status})"


class SlackDiscussion(models.Model):
    """A discussion started by a message in a Slack thread: its notices go to that thread. A thread has
    one discussion at a time; once it ended, the thread's next message starts the next one."""

    thread = models.ForeignKey(SlackThread, on_delete=models.CASCADE, related_name="discussions")
    discussion = models.OneToOneField("groups.GroupConversation", on_delete=models.CASCADE, related_name="+")
    # The Slack user whose message started it (separation of duties for its pauses).
    started_by = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"slack discussion {self.discussion_id} in {self.thread}"


class SlackNotice(models.Model):
    """One notice to a discussion's thread, recorded where the event happened and posted by the
    q-cluster. ``key`` names the event (``pause:<id>``, ``decision:<id>``, ``skipped:<turn>:<member>``,
    ``end``): recording it twice is a no-op, and the row is claimed before it is posted (as
    SlackDelivery), so no notice reaches the thread twice."""

    discussion = models.ForeignKey(
        SlackDiscussion, on_delete=models.CASCADE, related_name="notices", db_index=False
    )
    key = models.CharField(max_length=120)
    text = models.TextField()
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    ts = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["discussion", "key"], name="slack_notice_once")]

    def __str__(self) -> str:
        return f"slack notice {self.key} of {self.discussion_id} ({self.status})"
