"""What the service answers, as typed values (the wire's JSON stays in ``raw``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PENDING, APPROVED, REJECTED, CANCELLED, EXPIRED = "PENDING", "APPROVED", "REJECTED", "CANCELLED", "EXPIRED"


@dataclass(frozen=True)
class Decision:
    verdict: str
    note: str
    decided_by: str
    automated: bool
    amended_arguments: dict[str, Any] | None = None
    amended_request: dict[str, Any] | None = None
    guidance: str | None = None

    @classmethod
    def from_json(cls, body: dict[str, Any] | None) -> Decision | None:
        if not body:
            return None
        return cls(
            verdict=body["verdict"],
            note=body.get("note") or "",
            decided_by=body.get("decidedBy") or "",
            automated=bool(body.get("automated")),
            amended_arguments=body.get("amendedArguments"),
            amended_request=body.get("amendedRequest"),
            guidance=body.get("guidance"),
        )


@dataclass(frozen=True)
class Grant:
    """What an approval lets the agent run: the arguments and (pinned) request as approved, edited or not.
    ``token`` and ``claim_id`` come with a successful claim only (the token is a signed JWT a target API
    can check)."""

    arguments: dict[str, Any]
    request: dict[str, Any] | None
    expires_at: str | None
    claimed: bool
    claim_id: str | None = None
    token: str | None = None

    @classmethod
    def from_json(cls, body: dict[str, Any] | None) -> Grant | None:
        if not body:
            return None
        return cls(
            arguments=body.get("arguments") or {},
            request=body.get("request"),
            expires_at=body.get("expiresAt"),
            claimed=bool(body.get("claimed")),
            claim_id=body.get("claimId"),
            token=body.get("token"),
        )


@dataclass(frozen=True)
class ApprovalRequest:
    id: str
    status: str
    decision: Decision | None
    grant: Grant | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ApprovalRequest:
        return cls(
            id=body["id"],
            status=body["status"],
            decision=Decision.from_json(body.get("decision")),
            grant=Grant.from_json(body.get("grant")),
            raw=body,
        )

    @property
    def pending(self) -> bool:
        return self.status == PENDING
