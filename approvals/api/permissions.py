"""DRF permission classes over approvals.access, shared by every app's API (the core's, tool gating's, the surfaces')."""

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission

from approvals.access import is_admin, is_service_account


class SignedInPerson(BasePermission):
    """The default of every endpoint: a signed-in person. A service account (role ``agent``) is refused
    everywhere but the approval requests, whose views say so (``approval_requests.api.permissions``)."""

    message = "Access denied: a service account (role agent) may only use /approval-requests"

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        if not user or not user.is_authenticated:
            return False
        return not is_service_account(user)


class AdminWritesAuthenticatedReads(BasePermission):
    """Anyone signed in may read agents; only admins change or deploy them."""

    message = "Access denied: only admins may change or deploy agents"

    def has_permission(self, request: Any, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated or is_service_account(request.user):
            return False
        return request.method in SAFE_METHODS or is_admin(request.user)


class AdminOnly(BasePermission):
    message = "Access denied: admins only"

    def has_permission(self, request: Any, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated and is_admin(request.user))
