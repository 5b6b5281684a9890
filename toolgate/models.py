"""What a tool-call pause keeps on the server: the gated batch, its calls, and the execution journal.

Raw arguments, the frozen transcript and request fingerprints live here and never leave the server:
every surface shows the approver-facing projection built by toolgate.gate.pause_details.
"""

from __future__ import annotations

from django.db import models

from approvals.models import Pause


class PendingToolBatch(models.Model):
    """The gated calls of one TOOL_CALL pause, and where the LLM task's loop continues."""

    pause = models.OneToOneField(Pause, on_delete=models.CASCADE, primary_key=True, related_name="tool_batch")
    conversation_id = models.UUIDField()
    llm_task_id = models.CharField(max_length=200)
    llm_task_index = models.PositiveIntegerField()
    workflow_id = models.CharField(max_length=200)
    iteration_index = models.PositiveIntegerField(default=0)
    # The in-flight chat messages at pause time (None when over HITL_TRANSCRIPT_MAX_BYTES).
    transcript = models.JSONField(null=True, blank=True)
    transcript_omitted = models.BooleanField(default=False)
    executed_ungated_calls = models.JSONField(default=list, blank=True)
    trace = models.JSONField(default=list, blank=True)
    # No-progress guard: canonical-JSON fingerprint of the gated calls, and automated approvals this turn.
    fingerprint = models.CharField(max_length=64)
    auto_approve_count = models.PositiveIntegerField(default=0)
    pause_count_this_turn = models.PositiveIntegerField(default=1)
    effective_config = models.JSONField(default=dict, blank=True)
    effective_rule = models.JSONField(null=True, blank=True)
    interim_text = models.TextField(blank=True, default="")
    pending_message = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"tool batch of pause {self.pause_id}"


class PendingToolCall(models.Model):
    batch = models.ForeignKey(
        PendingToolBatch, on_delete=models.CASCADE, related_name="calls", db_index=False
    )
    position = models.PositiveIntegerField()
    call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200)
    source = models.CharField(max_length=16)
    arguments_raw = models.TextField(blank=True, default="")
    args_truncated = models.BooleanField(default=False)
    arguments_redacted = models.TextField(blank=True, default="")
    gate_reason = models.CharField(max_length=256, blank=True, default="")
    matched_rule = models.CharField(max_length=256, blank=True, default="")
    # Request pinning (http tools): a keyed HMAC of the resolved request, and its redacted preview;
    # UNRESOLVED_FINGERPRINT when the request could not be resolved at gate time (refused if approved).
    request_fingerprint = models.CharField(max_length=64, blank=True, default="")
    request_preview = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["batch", "call_id"], name="pending_call_unique"),
        ]
        ordering = ["position"]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.call_id})"

    @property
    def request_pinned(self) -> bool:
        return bool(self.request_fingerprint) and self.request_fingerprint != UNRESOLVED_FINGERPRINT


UNRESOLVED_FINGERPRINT = "unresolved"


class JournalStatus(models.TextChoices):
    EXECUTING = "EXECUTING"
    EXECUTED = "EXECUTED"


class JournalStepKind(models.TextChoices):
    TOOL_CALL = "TOOL_CALL"  # an approved tool call (toolgate.runtime.tool_continuation)
    HTTP_CALL = "HTTP_CALL"  # an httpcalls task's call run by a continuation (toolgate.runtime.step_journal)


class JournalEntry(models.Model):
    """At most once: a side-effecting step of a continuation (an approved tool call, an http call run after
    a decision) is claimed (EXECUTING) before it runs, its result recorded after."""

    conversation_id = models.UUIDField()
    pause_epoch = models.UUIDField()
    call_id = models.CharField(
        max_length=200
    )  # the tool call's id, or toolgate.runtime.step_journal.step_key
    tool_name = models.CharField(max_length=200)  # the tool, or the http call's name
    step_kind = models.CharField(
        max_length=16, choices=JournalStepKind.choices, default=JournalStepKind.TOOL_CALL
    )
    # An http call's declared method and path template, redacted (never the rendered request).
    method = models.CharField(max_length=16, blank=True, default="")
    path = models.CharField(max_length=500, blank=True, default="")
    status = models.CharField(max_length=16, choices=JournalStatus.choices, default=JournalStatus.EXECUTING)
    result = models.TextField(blank=True, default="")
    decided_by = models.CharField(max_length=191, blank=True, default="")
    claimed_at = models.DateTimeField()
    executed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pause_epoch", "call_id"], name="journal_once_per_call"),
        ]
        indexes = [
            models.Index(fields=["conversation_id"], name="journal_conversation"),
            models.Index(fields=["claimed_at"], name="journal_claimed"),
        ]
        verbose_name_plural = "journal entries"

    def __str__(self) -> str:
        return f"{self.tool_name} {self.call_id} ({self.status})"


class StoredSecret(models.Model):
    """A secret behind ``${vault:NAME}``: the value is Fernet-encrypted at rest and never served."""

    name = models.CharField(max_length=128, unique=True)
    ciphertext = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "secret"

    def __str__(self) -> str:
        return self.name
