"""Who may call the approval requests' endpoints at all: anyone signed in, service accounts included
(each view's selector then applies the access rule of approval_requests.selectors)."""

from typing import Any

from rest_framework.permissions import BasePermission


class SignedInOrServiceAccount(BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated)
