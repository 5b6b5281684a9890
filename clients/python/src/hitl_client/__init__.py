"""Client of the HITL approval service for agents that run anywhere.

An agent asks for an approval (``request_approval``), waits for a reviewer (``wait``), claims the one
execution the approval grants (``claim``) and reports what happened (``report_outcome``); ``execute``
does it all for an HTTP request (sent only exactly as approved, at most once) and ``require_approval``
for a plain function. ``HitlClient`` is synchronous, ``AsyncHitlClient`` the same awaited.
"""

from hitl_client.async_client import AsyncHitlClient
from hitl_client.client import HitlClient
from hitl_client.errors import (
    AlreadyClaimed,
    BadRequest,
    Cancelled,
    Expired,
    Forbidden,
    GrantExpired,
    HitlError,
    IdempotencyConflict,
    NotApproved,
    NotFound,
    OutcomeUnknown,
    Rejected,
    RequestChanged,
    Throttled,
    Unauthenticated,
    WaitTimeout,
    WrongState,
)
from hitl_client.models import ApprovalRequest, Decision, Grant
from hitl_client.wire import SECRET_HEADERS, idempotency_key

__all__ = [
    "SECRET_HEADERS",
    "AlreadyClaimed",
    "ApprovalRequest",
    "AsyncHitlClient",
    "BadRequest",
    "Cancelled",
    "Decision",
    "Expired",
    "Forbidden",
    "Grant",
    "GrantExpired",
    "HitlClient",
    "HitlError",
    "IdempotencyConflict",
    "NotApproved",
    "NotFound",
    "OutcomeUnknown",
    "Rejected",
    "RequestChanged",
    "Throttled",
    "Unauthenticated",
    "WaitTimeout",
    "WrongState",
    "idempotency_key",
]
