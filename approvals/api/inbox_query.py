"""The ``limit`` of the pending-approvals inboxes, read through the one query parser."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from approvals.selectors import LIMIT_MAX, LIMIT_MIN
from common.query_params import QueryParams

INBOX_DEFAULT_LIMIT = 200
GROUP_INBOX_DEFAULT_LIMIT = 100  # EDDI's, for the group inboxes


def inbox_limit(params: Mapping[str, Any], *, default: int = INBOX_DEFAULT_LIMIT) -> int:
    """The ``limit`` of a pending-approvals inbox: 1..1000 (clamped), ``default`` when absent; a value
    that is not one integer is a 400."""
    query = QueryParams(params)
    limit = query.integer("limit", default=default, low=LIMIT_MIN, high=LIMIT_MAX)
    query.raise_if_invalid()
    return limit
