"""DRF permission classes over approvals.access, shared by every app's API (the core's, tool gating's, the surfaces')."""

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission

from approvals.access import is_admin


class AdminWritesAuthenticatedReads(BasePermission):
    """Anyone signed in may read agents; only admins change or deploy them."""

    message = "Access denied: only admins may change or deploy agents"

    def has_permission(self, request: Any, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        return request.method in SAFE_METHODS or is_admin(request.user)


class AdminOnly(BasePermission):
    message = "Access denied: admins only"

    def has_permission(self, request: Any, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated and is_admin(request.user))
