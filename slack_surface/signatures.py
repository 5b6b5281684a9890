"""Verifying that a request comes from Slack: slack_sdk's SignatureVerifier (v0 HMAC-SHA256, ±300 s).

Nothing of a request is acted on before its signature holds: a missing or non-numeric timestamp, a
missing signature, a replay older than five minutes and a wrong secret are all refused alike (401).
"""

from __future__ import annotations

from collections.abc import Iterable

from slack_sdk.signature import SignatureVerifier

from common.errors import ApplicationError
from slack_surface.integrations import SecretUnavailable, resolved
from slack_surface.models import SlackIntegration

TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
SIGNATURE_HEADER = "X-Slack-Signature"


class Unsigned(ApplicationError):
    status = 401
    code = "UNAUTHENTICATED"
    title = "Unauthenticated"


REFUSAL = "The request is not signed by Slack for a configured integration (or is older than five minutes)."


def signed_by(
    integration: SlackIntegration, *, body: bytes, timestamp: str | None, signature: str | None
) -> bool:
    if not timestamp or not signature or not timestamp.strip().isdigit():
        return False
    try:
        secret = resolved(integration.signing_secret_ref)
    except SecretUnavailable:
        return False
    return SignatureVerifier(secret).is_valid(body=body, timestamp=timestamp.strip(), signature=signature)


def signing_integration(
    candidates: Iterable[SlackIntegration], *, body: bytes, timestamp: str | None, signature: str | None
) -> SlackIntegration:
    """The first of ``candidates`` whose signing secret signed the request; Unsigned (401) if none did."""
    if timestamp and signature:
        for integration in candidates:
            if signed_by(integration, body=body, timestamp=timestamp, signature=signature):
                return integration
    raise Unsigned(REFUSAL)
