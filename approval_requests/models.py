"""An approval request, its claim and outcome; the webhook deliveries and signing secrets of its account."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class RequestStatus(models.TextChoices):
    PENDING = "PENDING"
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    CANCELLED = "CANCELLED"
    EXPIRED = "EXPIRED"


class OutcomeStatus(models.TextChoices):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class ApprovalRequest(models.Model):
    """One action an agent asks to take, from PENDING to its end, and the one execution it is granted.

    The decision itself lives on the core's Pause (``pause_id``); ``status`` mirrors it for listing and
    is moved only in the decision's (or the cancel's) transaction, by this engine's handler. The claim is
    a compare-and-set on ``claimed_at`` being null: the first claim wins, every later one is refused.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    idempotency_key = models.CharField(max_length=200)
    # A keyed digest of the filed body (never a secret in any form): the same key with another body is a 409.
    filing_digest = models.CharField(max_length=64)
    agent = models.CharField(max_length=200)
    action_name = models.CharField(max_length=200)
    arguments = models.JSONField(default=dict)
    reason = models.CharField(max_length=500)
    context = models.JSONField(null=True, blank=True)
    on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    hitl_config = models.JSONField(default=dict, blank=True)
    callback_url = models.CharField(max_length=2048, blank=True, default="")
    # The pinned request as the reviewer sees it (secret headers by name only), and its keyed fingerprint
    # with the keyed digests of the secret header values it covers (approval_requests.pinning).
    request_preview = models.JSONField(null=True, blank=True)
    request_fingerprint = models.CharField(max_length=64, blank=True, default="")
    secret_digests = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=RequestStatus.choices, default=RequestStatus.PENDING)
    pause_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    # What an approval grants: the arguments (and pinned request) as approved, amended or not.
    approved_arguments = models.JSONField(null=True, blank=True)
    approved_request = models.JSONField(null=True, blank=True)
    approved_fingerprint = models.CharField(max_length=64, blank=True, default="")
    grant_expires_at = models.DateTimeField(null=True, blank=True)
    # The one claim (its single-use id is the grant token's ``jti``) and what the agent reported.
    claim_id = models.UUIDField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    outcome_status = models.CharField(max_length=16, choices=OutcomeStatus.choices, blank=True, default="")
    outcome_http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    outcome_summary = models.CharField(max_length=1000, blank=True, default="")
    outcome_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["account", "idempotency_key"], name="approval_request_idempotency"
            ),
        ]
        indexes = [
            # The lists (approval_requests.selectors.visible_requests), newest first (created_at, then id):
            # a reviewer's, a service account's own and a person's, each of one status and of every status.
            # Each index holds its list's whole order, so PostgreSQL reads exactly the rows of the page
            # whatever else the table holds. Without the three of every status, such a list read all of
            # the caller's rows and sorted them (at 100,000 requests: 130 ms for a reviewer, 28 ms for an
            # agent that filed 5,000). The reviewer's pending inbox has a partial index of its own: with
            # only (status, …), the planner walked the newest requests of every status instead (created_at
            # follows the table's order, status does not), through 100,000 decided ones in 46 ms.
            models.Index(
                fields=["-created_at", "-id"], condition=Q(status="PENDING"), name="approval_request_pending"
            ),
            models.Index(fields=["status", "-created_at", "-id"], name="approval_request_status"),
            models.Index(fields=["account", "status", "-created_at", "-id"], name="approval_request_account"),
            models.Index(
                fields=["on_behalf_of", "status", "-created_at", "-id"], name="approval_request_behalf"
            ),
            models.Index(fields=["-created_at", "-id"], name="approval_request_newest"),
            models.Index(fields=["account", "-created_at", "-id"], name="approval_request_acct_newest"),
            models.Index(
                fields=["on_behalf_of", "-created_at", "-id"], name="approval_request_behalf_newest"
            ),
        ]

    def __str__(self) -> str:
        return f"approval request {self.id} ({self.action_name}, {self.status})"


class SigningSecret(models.Model):
    """The Standard Webhooks secret of one service account (``whsec_…``): shown once when made."""

    account = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    secret = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"webhook signing secret of user {self.account_id}"


class DeliveryStatus(models.TextChoices):
    PENDING = "PENDING"
    DELIVERED = "DELIVERED"
    FAILED = "FAILED"


class WebhookDelivery(models.Model):
    """One event for one callback URL, delivered at least once: each attempt's result is kept here."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)  # the webhook-id
    approval_request = models.ForeignKey(
        ApprovalRequest, on_delete=models.CASCADE, related_name="deliveries", db_index=False
    )
    event = models.CharField(max_length=64)
    url = models.CharField(max_length=2048)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["next_attempt_at"], condition=Q(status="PENDING"), name="webhook_delivery_due"
            ),
            models.Index(fields=["approval_request", "created_at"], name="webhook_delivery_request"),
        ]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.event} to {self.url} ({self.status})"
