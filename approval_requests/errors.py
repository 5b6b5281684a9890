"""The approval requests' own refusals (409s whose ``code`` tells an agent what to do next)."""

from __future__ import annotations

from common.errors import ApplicationError


class AlreadyClaimed(ApplicationError):
    """The approval was claimed before and its outcome reported: never a second grant."""

    status = 409
    code = "ALREADY_CLAIMED"
    title = "Already claimed"


class OutcomeUnknown(ApplicationError):
    """The approval was claimed before and no outcome was reported: the first claimant may have executed
    it (or crashed doing so). Never a second grant; find out what happened before acting again."""

    status = 409
    code = "OUTCOME_UNKNOWN"
    title = "Outcome unknown"


class RequestChanged(ApplicationError):
    """The request claimed differs from the one approved: nothing is granted (audited)."""

    status = 409
    code = "REQUEST_CHANGED"
    title = "Request changed"


class GrantExpired(ApplicationError):
    """The approval was not claimed before its grant expired: file a new request."""

    status = 409
    code = "GRANT_EXPIRED"
    title = "Grant expired"


class IdempotencyConflict(ApplicationError):
    """The idempotency key was used before with another body."""

    status = 409
    code = "IDEMPOTENCY_CONFLICT"
    title = "Idempotency key reused"
