"""The group surface's own errors, rendered by the one exception handler like every ApplicationError."""

from __future__ import annotations

from approvals.errors import ApplicationError


class NotSupportedYet(ApplicationError):
    """A group uses something discussions cannot honour yet: refused rather than run without it."""

    status = 409
    code = "NOT_SUPPORTED_YET"
    title = "Not supported yet"
