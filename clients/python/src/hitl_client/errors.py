"""Typed errors: each refusal of the service as an exception carrying its problem ``code``."""

from __future__ import annotations

from typing import Any


class HitlError(Exception):
    """A refusal of the service (an RFC 9457 problem): ``status``, ``code`` and ``detail``, and the whole
    ``problem`` body (e.g. ``errors`` naming each bad field, ``currentState``, ``outcome``)."""

    def __init__(self, status: int, code: str, detail: str, problem: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.problem = problem or {}


class BadRequest(HitlError):
    """400: the body or a parameter is wrong (``problem["errors"]`` names each field); nothing was done."""


class Unauthenticated(HitlError):
    """401: no token, or a token the service does not know."""


class Forbidden(HitlError):
    """403: the token's account may not do this (or the request does not exist for it)."""


class NotFound(HitlError):
    """404: no such request (told to reviewers only)."""


class WrongState(HitlError):
    """409 ``WRONG_STATE``: not possible in the request's current state (``current_state``)."""

    @property
    def current_state(self) -> str | None:
        return self.problem.get("currentState")


class IdempotencyConflict(HitlError):
    """409: the idempotency key was used before with another body."""


class AlreadyClaimed(HitlError):
    """409: the approval was claimed and executed before (``outcome`` is what the first claim reported).
    Never executed twice."""

    @property
    def outcome(self) -> dict[str, Any] | None:
        return self.problem.get("outcome")


class OutcomeUnknown(HitlError):
    """409: the approval was claimed before and nobody reported what happened: it may have run. Find out
    at the target before acting again; the service never grants it twice."""


class RequestChanged(HitlError):
    """409: the request about to be sent is not the one approved; nothing was granted or sent."""


class GrantExpired(HitlError):
    """409: the approval was not claimed in time; file a new request."""


class Throttled(HitlError):
    """429: over the account's request rate."""


class NotApproved(Exception):
    """The request ended without an approval: nothing was executed. ``approval`` is its last state."""

    def __init__(self, approval: Any) -> None:
        decision = approval.decision
        why = f": {decision.note}" if decision is not None and decision.note else ""
        super().__init__(f"approval request {approval.id} is {approval.status}{why}")
        self.approval = approval


class Rejected(NotApproved):
    """A reviewer (or a timeout) rejected it. ``guidance`` is the reviewer's instruction when they replied
    with guidance instead of approving."""

    @property
    def guidance(self) -> str | None:
        return self.approval.decision.guidance if self.approval.decision else None


class Cancelled(NotApproved):
    """It was withdrawn."""


class Expired(NotApproved):
    """Its timeout policy ended it without a decision (``ABORT``)."""


class WaitTimeout(TimeoutError):
    """The caller's own wait ran out while the request was still pending (it stays pending)."""


_BY_CODE: dict[str, type[HitlError]] = {
    "BAD_REQUEST": BadRequest,
    "UNAUTHENTICATED": Unauthenticated,
    "FORBIDDEN": Forbidden,
    "NOT_FOUND": NotFound,
    "WRONG_STATE": WrongState,
    "IDEMPOTENCY_CONFLICT": IdempotencyConflict,
    "ALREADY_CLAIMED": AlreadyClaimed,
    "OUTCOME_UNKNOWN": OutcomeUnknown,
    "REQUEST_CHANGED": RequestChanged,
    "GRANT_EXPIRED": GrantExpired,
    "THROTTLED": Throttled,
}


def error_for(status: int, body: Any) -> HitlError:
    """The typed error of a refusal (a problem body, or whatever the server sent)."""
    problem = body if isinstance(body, dict) else {}
    code = str(
        problem.get("code")
        or {401: "UNAUTHENTICATED", 403: "FORBIDDEN", 404: "NOT_FOUND"}.get(status, "ERROR")
    )
    detail = str(problem.get("detail") or problem.get("error") or f"HTTP {status}")
    return _BY_CODE.get(code, HitlError)(status, code, detail, problem)
