"""The API tokens that ``POST /auth/token`` hands out (DRF's ``Token``: one per user)."""

from __future__ import annotations

from typing import Any

from rest_framework.authtoken.models import Token


def issue_api_token(*, user: Any) -> str:
    """The user's API token, created on the first login: every later login gets the same key."""
    token, _ = Token.objects.get_or_create(user=user)
    return token.key
