"""The execution grant as a token a target API can check: a short-lived JWT signed with Ed25519.

It binds the approval request (``sub``), the one claim that received it (``jti``, single-use: a target
that keeps the ids it has seen refuses a replay), what was approved (``act``, the action's name;
``args``, the SHA-256 of the approved arguments as canonical JSON; ``req``, for a pinned request, the
SHA-256 of ``METHOD\\nURL\\nBODY`` as approved) and the grant's expiry (``exp``). The public keys are
served as a JWK set at ``/.well-known/hitl-grant-keys``, so a target verifies a token with any JWT
library (docs/approval-requests.md shows one in a few lines). The signing key is ``HITL_GRANT_SIGNING_KEY``
(a base64 Ed25519 seed of 32 bytes), else derived from ``SECRET_KEY``; it never leaves the server. A key
that is not one is refused at start (approval_requests/checks.py), and by every claim until it is fixed.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
from datetime import datetime
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

ISSUER = "hitl"
AUDIENCE = "hitl-grant"
ALGORITHM = "EdDSA"


SEED_BYTES = 32
KEY_HINT = (
    "HITL_GRANT_SIGNING_KEY is the base64 of a random 32-byte Ed25519 seed (or empty: derived from "
    'SECRET_KEY). Make one with: python -c "import base64, secrets; '
    'print(base64.b64encode(secrets.token_bytes(32)).decode())"'
)


def parse_seed(configured: str) -> bytes:
    """The 32-byte seed ``HITL_GRANT_SIGNING_KEY`` holds (standard or URL-safe base64, padded or not), or
    ValueError saying what is wrong with it (never its value)."""
    text = configured.strip().replace("-", "+").replace("_", "/")
    try:
        seed = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("HITL_GRANT_SIGNING_KEY is not base64") from None
    if len(seed) != SEED_BYTES:
        raise ValueError(
            f"HITL_GRANT_SIGNING_KEY decodes to {len(seed)} bytes; an Ed25519 seed is {SEED_BYTES} bytes"
        )
    return seed


def key_problem() -> str | None:
    """What is wrong with the configured ``HITL_GRANT_SIGNING_KEY`` (None: nothing, or it is empty)."""
    configured = getattr(settings, "HITL_GRANT_SIGNING_KEY", "") or ""
    if not configured:
        return None
    try:
        parse_seed(configured)
    except ValueError as problem:
        return str(problem)
    return None


@functools.cache
def _signing_key(configured: str, secret_key: str) -> Ed25519PrivateKey:
    if configured:
        try:
            seed = parse_seed(configured)
        except ValueError as problem:
            raise ImproperlyConfigured(f"{problem}. {KEY_HINT}") from None
    else:
        seed = hmac.new(secret_key.encode("utf-8"), b"hitl-grant-signing-key", hashlib.sha256).digest()
    return Ed25519PrivateKey.from_private_bytes(seed)


def signing_key() -> Ed25519PrivateKey:
    return _signing_key(getattr(settings, "HITL_GRANT_SIGNING_KEY", "") or "", settings.SECRET_KEY)


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def public_jwk() -> dict[str, str]:
    raw = signing_key().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": _b64url(raw),
        "kid": hashlib.sha256(raw).hexdigest()[:16],
        "alg": ALGORITHM,
        "use": "sig",
    }


def key_set() -> dict[str, list[dict[str, str]]]:
    """The JWK set of ``/.well-known/hitl-grant-keys``."""
    return {"keys": [public_jwk()]}


def arguments_digest(arguments: Any) -> str:
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def request_digest(method: str, url: str, body: str | None) -> str:
    """What a target recomputes from the request it received: SHA-256 of ``METHOD\\nURL\\nBODY``."""
    return hashlib.sha256(f"{method.upper()}\n{url}\n{body or ''}".encode()).hexdigest()


def grant_token(
    *,
    request_id: str,
    claim_id: str,
    action: str,
    arguments: Any,
    request: dict[str, Any] | None,
    issued_at: datetime,
    expires_at: datetime,
) -> str:
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": request_id,
        "jti": claim_id,
        "iat": int(issued_at.timestamp()),
        "exp": int(expires_at.timestamp()),
        "act": action,
        "args": arguments_digest(arguments),
    }
    if request is not None:
        claims["req"] = request_digest(request["method"], request["url"], request.get("body"))
    return jwt.encode(claims, signing_key(), algorithm=ALGORITHM, headers={"kid": public_jwk()["kid"]})
