"""The admin site reviewers sign in to: the product's name, errors in a reviewer's words, and their pending
count on the index.

Django's admin tells a person whose password is right but who is not staff to "enter the correct
username and password", which sends her hunting for a typo. Here she is told the account has no
reviewer access; wrong credentials still get Django's one message, so nothing is revealed to a guesser.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin import AdminSite
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.template.response import TemplateResponse

from approvals.access import may_use_inbox
from approvals.models import PauseStatus
from approvals.selectors import reviewable_pauses

INBOX_MODEL = "PendingApproval"
PRODUCT_NAME = "HITL approvals"
NO_REVIEWER_ACCESS = (
    "You signed in as %(username)s, but this account has no reviewer access. "
    "Ask an administrator to give it staff access to the approval inbox."
)


class ReviewerLoginForm(AdminAuthenticationForm):
    def confirm_login_allowed(self, user: Any) -> None:
        """Called only once the credentials are right: then, and only then, say what is missing."""
        if user.is_active and not may_use_inbox(user):
            raise ValidationError(
                NO_REVIEWER_ACCESS, code="no_reviewer_access", params={"username": user.get_username()}
            )
        super().confirm_login_allowed(user)


def pending_count(user: Any) -> int:
    """How many PENDING pauses ``user`` may decide in the inbox: one COUNT over the inbox's own scope."""
    return reviewable_pauses(user=user, status=PauseStatus.PENDING, decidable_now=True).count()


def with_pending_count(request: HttpRequest, response: TemplateResponse) -> TemplateResponse:
    """The inbox's entry of the page's app list reads "Pending approvals (12)" (no query without it)."""
    for app in (response.context_data or {}).get("app_list") or []:
        for model in app.get("models", []):
            if model.get("object_name") == INBOX_MODEL:
                model["name"] = f"{model['name']} ({pending_count(request.user)})"
                return response
    return response


# An app's name as a reviewer reads it, where the library's own name means nothing to them.
APP_NAMES = {"django_q": "Schedules and background tasks"}


class ReviewerAdminSite(AdminSite):
    login_form = ReviewerLoginForm
    # the product's name where Django says "Django administration"; no "View site": there is none
    site_header = PRODUCT_NAME
    site_title = PRODUCT_NAME
    index_title = "Approvals"
    site_url = None

    def has_permission(self, request: HttpRequest) -> bool:
        """Active staff, never a service account (approvals.access.may_use_inbox)."""
        return may_use_inbox(request.user)

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[dict[str, Any]]:
        """Django's app list (sidebar, index, app pages) with each app under a reviewer's name, and the
        inbox offered to view (it is where decisions are made), not to "Change"."""
        apps = super().get_app_list(request, app_label)
        for app in apps:
            app["name"] = APP_NAMES.get(app["app_label"], app["name"])
            for model in app.get("models", []):
                if model.get("object_name") == INBOX_MODEL:
                    model["view_only"] = True  # its link reads "View": a reviewer changes no pause's fields
        return apps

    def index(self, request: HttpRequest, extra_context: dict | None = None) -> TemplateResponse:
        return with_pending_count(request, super().index(request, extra_context))

    def app_index(
        self, request: HttpRequest, app_label: str, extra_context: dict | None = None
    ) -> TemplateResponse:
        return with_pending_count(request, super().app_index(request, app_label, extra_context))
