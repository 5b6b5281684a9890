"""Token authentication that reads the caller's roles with the token, in one hand-written query.

Every request asks ``approvals.access`` for the caller's roles (admin, approver); DRF's
``TokenAuthentication`` reads the token and its user, and the group names then took a query of their
own. Here the token, its user and the user's group names (a correlated ``ARRAY(SELECT ...)``) come in
one statement written once (``common.rows``: no queryset is built per request), and the names are
handed to ``approvals.access.remember_group_names``. What is refused is refused exactly as DRF refuses
it (unknown token, inactive user). On the SQLite fallback it is DRF's own.

The statement's answer for an accepted token is kept by ``approvals.credential_cache`` until a change to
the token, its user or the user's groups commits: a client's later requests skip it.
"""

from __future__ import annotations

import functools
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.authtoken.models import Token

from approvals.access import remember_group_names
from approvals.credential_cache import credentials
from common.rows import fetch_one, instance, on_postgresql, select_list, table, width


@functools.cache
def _token_with_roles_sql() -> str:
    user_model = get_user_model()
    groups = user_model._meta.get_field("groups")
    through = groups.remote_field.through
    quote = connection.ops.quote_name
    group_model = groups.related_model
    return (
        f"SELECT {select_list(Token, 't')}, {select_list(user_model, 'u')}, "  # nosec B608  # identifiers from model metadata, values are parameters
        f"ARRAY(SELECT g.{quote('name')} FROM {table(group_model)} g JOIN {table(through)} ug "
        f"ON ug.{quote(groups.m2m_reverse_name())} = g.{quote(group_model._meta.pk.column)} "
        f"WHERE ug.{quote(groups.m2m_column_name())} = u.{quote(user_model._meta.pk.column)}) "
        f"FROM {table(Token)} t JOIN {table(user_model)} u "
        f"ON u.{quote(user_model._meta.pk.column)} = t.{quote(Token._meta.get_field('user').column)} "
        f"WHERE t.{quote(Token._meta.pk.column)} = %s"
    )


# ``Authorization: Token <key>`` (DRF's keyword), and ``Bearer <key>`` as EDDI's clients send the same
# key (docs/eddi-compatibility.md); either case.
KEYWORDS = (b"token", b"bearer")


def token_key(header: bytes) -> str | None:
    """The key of an ``Authorization`` header that names one of ``KEYWORDS``; None for any other scheme.
    Raises AuthenticationFailed for a malformed one, as DRF does."""
    parts = header.split()
    if not parts or parts[0].lower() not in KEYWORDS:
        return None
    if len(parts) != 2:
        raise exceptions.AuthenticationFailed(_("Invalid token header. No credentials provided."))
    try:
        return parts[1].decode()
    except UnicodeError:
        raise exceptions.AuthenticationFailed(
            _("Invalid token header. Token string should not contain invalid characters.")
        ) from None


class TokenWithRolesAuthentication(TokenAuthentication):
    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        key = token_key(get_authorization_header(request))
        return None if key is None else self.authenticate_credentials(key)

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        if not on_postgresql() or self.get_model() is not Token:
            return super().authenticate_credentials(key)
        row = credentials.lookup(key)
        stamp = None
        if row is None:
            stamp = credentials.stamp()
            row = fetch_one(_token_with_roles_sql(), [key])
        if row is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        user_model = get_user_model()
        split = width(Token)
        token = instance(Token, row[:split])
        user = instance(user_model, row[split : split + width(user_model)])
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        credentials.keep(key, row, stamp)
        Token._meta.get_field("user").set_cached_value(token, user)
        remember_group_names(user, row[-1])
        return user, token
