"""The webhook delivery log in the admin: what each event of an approval request came to, read-only.

An operator reads here why an agent's service was not told (the receiver's last status, the error, how
many attempts, when the next one is due). Only reviewers (admins and approvers, who read every approval
request) see it, on the admin site that is for staff only. Nobody adds, changes or deletes a row here:
the deliveries are the service's record of what it sent. A callback URL is shown with credential-shaped
parts (userinfo, query values) redacted.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from approval_requests.models import WebhookDelivery
from approvals.access import sees_every_pause
from toolgate.outbound import redact_uri


def may_read_deliveries(user: Any) -> bool:
    """Admins and approvers (the admin site itself lets in active staff only)."""
    return sees_every_pause(user)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = (
        "created_at",
        "event",
        "account",
        "callback_url",
        "status",
        "attempts",
        "last_status_code",
        "last_error",
        "next_attempt_at",
        "delivered_at",
    )
    list_filter = ("status", "event")
    search_fields = ("=id", "=approval_request__id", "approval_request__account__username")
    ordering = ("-created_at",)
    date_hierarchy = "created_at"
    list_select_related = ("approval_request__account",)
    fields = (
        "webhook_id",
        "approval_request_shown",
        "account",
        "event",
        "callback_url",
        "status",
        "attempts",
        "last_status_code",
        "last_error",
        "created_at",
        "next_attempt_at",
        "delivered_at",
        "payload",
    )
    readonly_fields = fields

    @admin.display(description="webhook-id")
    def webhook_id(self, delivery: WebhookDelivery) -> str:
        return str(delivery.id)

    @admin.display(description="approval request")
    def approval_request_shown(self, delivery: WebhookDelivery) -> str:
        return str(delivery.approval_request_id)

    @admin.display(description="service account", ordering="approval_request__account__username")
    def account(self, delivery: WebhookDelivery) -> str:
        return delivery.approval_request.account.get_username()

    @admin.display(description="callback URL")
    def callback_url(self, delivery: WebhookDelivery) -> str:
        return redact_uri(delivery.url)

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookDelivery]:
        return super().get_queryset(request).select_related("approval_request__account")

    def has_module_permission(self, request: HttpRequest) -> bool:
        return may_read_deliveries(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_read_deliveries(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
