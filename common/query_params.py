"""Query parameters every store reads the same way."""

from __future__ import annotations

from rest_framework.request import Request

from common.errors import BadRequest


def requested_version(request: Request) -> int | None:
    """``?version=N`` (a positive integer), or None for the latest; as the agent and group stores read it."""
    raw = request.query_params.get("version")
    if raw in (None, ""):
        return None
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(
            "version must be a positive integer",
            errors=[{"field": "version", "message": "must be a positive integer"}],
        ) from None
    if value < 1:
        raise BadRequest(
            "version must be a positive integer",
            errors=[{"field": "version", "message": "must be a positive integer"}],
        )
    return value
