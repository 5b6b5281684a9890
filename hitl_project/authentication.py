"""Token authentication that reads the caller's roles with the token, in one query.

Every request asks ``approvals.access`` for the caller's roles (admin, approver); DRF's
``TokenAuthentication`` reads the token and its user, and the group names then took a query of their
own. Here the group names come in the same statement (a correlated ``ARRAY(SELECT ...)`` on
PostgreSQL) and are handed to ``approvals.access.remember_group_names``; what is refused is refused
exactly as DRF refuses it (unknown token, inactive user). On the SQLite fallback it is DRF's own.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection
from django.db.models import OuterRef
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from approvals.access import remember_group_names


class TokenWithRolesAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        if connection.vendor != "postgresql":
            return super().authenticate_credentials(key)
        model = self.get_model()
        names = Group.objects.filter(user=OuterRef("user_id")).values("name")
        token = (model.objects.select_related("user").annotate(hitl_group_names=ArraySubquery(names))
                 .filter(key=key).first())
        if token is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        remember_group_names(token.user, token.hitl_group_names)
        return token.user, token
