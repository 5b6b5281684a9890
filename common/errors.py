"""Domain errors. One exception handler (common.problems) turns them into problem details."""

from __future__ import annotations

from typing import Any


class ApplicationError(Exception):
    status = 500
    code = "INTERNAL"
    title = "Internal error"

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra


class BadRequest(ApplicationError):
    status = 400
    code = "BAD_REQUEST"
    title = "Bad request"

    def __init__(self, detail: str, errors: list[dict[str, str]] | None = None, **extra: Any) -> None:
        super().__init__(detail, **extra)
        if errors is not None:
            self.extra["errors"] = errors


class Forbidden(ApplicationError):
    status = 403
    code = "FORBIDDEN"
    title = "Forbidden"


class NotFound(ApplicationError):
    status = 404
    code = "NOT_FOUND"
    title = "Not found"


class WrongState(ApplicationError):
    status = 409
    code = "WRONG_STATE"
    title = "Wrong state"

    def __init__(self, detail: str, current_state: str | None, **extra: Any) -> None:
        super().__init__(detail, currentState=current_state, **extra)
        self.current_state = current_state


class LostRace(WrongState):
    """The pause was pending when read, but another decision won its compare-and-set first. REST answers
    it as any WrongState (409 WRONG_STATE); MCP names it CONFLICT, as EDDI does."""


class Conflict(ApplicationError):
    status = 409
    code = "CONFLICT"
    title = "Conflict"


class Disabled(ApplicationError):
    status = 409
    code = "DISABLED"
    title = "Disabled"


class LimitReached(ApplicationError):
    """A cap on open work is reached (approvals.pause_caps): nothing was started or said. ``setting`` and
    ``limit`` name the cap."""

    status = 409
    code = "LIMIT_REACHED"
    title = "Limit reached"
