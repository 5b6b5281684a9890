"""Execution grant tokens checked as a target API would: the JWK set fetched from
``/.well-known/hitl-grant-keys`` and the claim's token verified with PyJWT (EdDSA, audience
``hitl-grant``); every claim recomputed here from what was approved. And the start-up check of
``HITL_GRANT_SIGNING_KEY``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

import jwt
import pytest
import time_machine
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from rest_framework.test import APIClient

from approvals.checks import TAG
from harnesses.users import client_for
from hitl_project.startup_checks import refuse_to_start_on_key_errors
from tests.approval_requests.conftest import PINNED, file_request

pytestmark = pytest.mark.django_db

SEED = bytes(range(32))
SEED_B64 = base64.b64encode(SEED).decode()


def key_set() -> jwt.PyJWKSet:
    """The JWK set as anyone fetches it: no token needed."""
    answer = APIClient().get("/.well-known/hitl-grant-keys")
    assert answer.status_code == 200, answer.content
    return jwt.PyJWKSet.from_dict(answer.json())


def verified(token: str, keys: jwt.PyJWKSet) -> dict[str, Any]:
    """What a target does: the key named by the token's ``kid``, EdDSA only, the grant audience."""
    key = keys[jwt.get_unverified_header(token)["kid"]]
    return jwt.decode(token, key.key, algorithms=["EdDSA"], audience="hitl-grant", issuer="hitl")


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def epoch(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())


def approved_and_claimed(agent, approver, decision: dict[str, Any], claimed_request: Any = None, **filing):
    filed = file_request(agent, **filing)
    decided = client_for(approver).post(f"/approval-requests/{filed['id']}/decision", decision, format="json")
    assert decided.status_code == 200, decided.content
    body = {"request": claimed_request} if claimed_request is not None else {}
    claimed = client_for(agent).post(f"/approval-requests/{filed['id']}/claim", body, format="json")
    assert claimed.status_code == 200, claimed.content
    read = client_for(agent).get(f"/approval-requests/{filed['id']}").json()
    return filed["id"], claimed.json()["grant"], read


def test_the_key_set_is_one_ed25519_signing_key():
    answer = APIClient().get("/.well-known/hitl-grant-keys")
    [key] = answer.json()["keys"]
    assert {k: key[k] for k in ("kty", "crv", "alg", "use")} == {
        "kty": "OKP",
        "crv": "Ed25519",
        "alg": "EdDSA",
        "use": "sig",
    }
    assert len(base64.urlsafe_b64decode(key["x"] + "=")) == 32 and key["kid"]
    assert "d" not in key  # the private part never leaves the server


def test_a_pinned_claims_token_binds_request_claim_action_arguments_and_request(agent, approver):
    request_id, grant, read = approved_and_claimed(
        agent, approver, {"verdict": "APPROVED"}, claimed_request=PINNED, request=PINNED
    )

    claims = verified(grant["token"], key_set())

    assert claims["sub"] == request_id
    assert claims["jti"] == grant["claimId"]
    assert claims["act"] == "refund"
    assert claims["args"] == sha256(canonical({"orderId": "A-1", "amount": 250}))
    assert claims["req"] == sha256(f"POST\n{PINNED['url']}\n{PINNED['body']}")
    assert claims["exp"] == epoch(grant["expiresAt"])
    assert claims["iat"] == epoch(read["claim"]["claimedAt"])
    assert claims["exp"] - claims["iat"] <= 15 * 60  # HITL_GRANT_TTL after the decision


def test_an_edited_approval_is_what_the_token_binds(agent, approver):
    amended_body = '{"orderId":"A-1","amount":100}'
    _, grant, _ = approved_and_claimed(
        agent,
        approver,
        {
            "verdict": "APPROVED",
            "amendedArguments": {"orderId": "A-1", "amount": 100},
            "amendedRequest": {"body": amended_body},
        },
        claimed_request={**PINNED, "body": amended_body},
        request=PINNED,
    )

    claims = verified(grant["token"], key_set())

    assert claims["args"] == sha256('{"amount":100,"orderId":"A-1"}')
    assert claims["req"] == sha256(f"POST\n{PINNED['url']}\n{amended_body}")


def test_an_unpinned_claims_token_has_no_request_digest(agent, approver):
    _, grant, _ = approved_and_claimed(agent, approver, {"verdict": "APPROVED"})
    claims = verified(grant["token"], key_set())
    assert "req" not in claims and claims["act"] == "refund"


def test_a_tampered_token_another_audience_and_an_expired_one_fail(agent, approver):
    _, grant, _ = approved_and_claimed(agent, approver, {"verdict": "APPROVED"})
    keys, token = key_set(), grant["token"]
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    widened = base64.urlsafe_b64encode(canonical({**claims, "act": "refund-all"}).encode()).rstrip(b"=")

    with pytest.raises(jwt.InvalidSignatureError):
        verified(f"{header}.{widened.decode()}.{signature}", keys)
    flipped = signature[:10] + ("A" if signature[10] != "A" else "B") + signature[11:]
    with pytest.raises(jwt.InvalidSignatureError):
        verified(f"{header}.{payload}.{flipped}", keys)
    with pytest.raises(jwt.InvalidAudienceError):
        jwt.decode(
            token, keys[jwt.get_unverified_header(token)["kid"]].key, algorithms=["EdDSA"], audience="x"
        )
    with pytest.raises(jwt.InvalidAlgorithmError):
        jwt.decode(token, keys[jwt.get_unverified_header(token)["kid"]].key, algorithms=["HS256"])
    with time_machine.travel(datetime.fromtimestamp(claims["exp"] + 1).astimezone(), tick=False):
        with pytest.raises(jwt.ExpiredSignatureError):
            verified(token, keys)
    assert verified(token, keys)["jti"] == grant["claimId"]  # the untouched token, in time


def test_the_configured_seed_signs_and_its_public_key_is_served(agent, approver, settings):
    default_keys = key_set()
    settings.HITL_GRANT_SIGNING_KEY = SEED_B64
    public = (
        Ed25519PrivateKey.from_private_bytes(SEED).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    )

    keys = key_set()
    [served] = keys.keys
    assert served.key_id == hashlib.sha256(public).hexdigest()[:16]
    assert APIClient().get("/.well-known/hitl-grant-keys").json()["keys"][0]["x"] == (
        base64.urlsafe_b64encode(public).rstrip(b"=").decode()
    )
    _, grant, _ = approved_and_claimed(agent, approver, {"verdict": "APPROVED"})
    assert verified(grant["token"], keys)["jti"] == grant["claimId"]
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(
            grant["token"], default_keys.keys[0].key, algorithms=["EdDSA"], audience="hitl-grant"
        )  # the key derived from SECRET_KEY no longer verifies it


# --- the start-up check of HITL_GRANT_SIGNING_KEY -----------------------------------------------------


def grant_key_messages() -> list[checks.CheckMessage]:
    return [m for m in checks.run_checks(tags=[TAG]) if m.id.endswith("007")]


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("not base64 at all!", "is not base64"),
        (base64.b64encode(bytes(16)).decode(), "decodes to 16 bytes"),
        (base64.b64encode(bytes(64)).decode(), "decodes to 64 bytes"),
    ],
)
def test_a_bad_key_is_refused_at_start_with_a_clear_message(settings, value, says):
    settings.HITL_GRANT_SIGNING_KEY = value
    [warning] = grant_key_messages()
    assert (warning.id, warning.level) == ("hitl.W007", checks.WARNING)  # development
    assert says in warning.msg and "HITL_GRANT_SIGNING_KEY" in warning.msg
    assert "32-byte" in warning.hint and value not in f"{warning.msg} {warning.hint}"

    settings.HITL_STRICT_CONFIG = True  # the production settings
    [error] = grant_key_messages()
    assert (error.id, error.level) == ("hitl.E007", checks.ERROR)
    with pytest.raises(
        ImproperlyConfigured, match=r"refusing to start: .*\(hitl\.E007\) HITL_GRANT_SIGNING_KEY"
    ):
        refuse_to_start_on_key_errors()


@pytest.mark.parametrize(
    "value",
    ["", SEED_B64, base64.urlsafe_b64encode(SEED).decode().rstrip("="), f" {SEED_B64}\n"],
)
def test_a_good_key_or_none_passes_the_check(settings, value):
    settings.HITL_GRANT_SIGNING_KEY = value
    settings.HITL_STRICT_CONFIG = True
    assert grant_key_messages() == []


def test_the_url_safe_spelling_is_the_same_key(settings):
    settings.HITL_GRANT_SIGNING_KEY = SEED_B64
    standard = APIClient().get("/.well-known/hitl-grant-keys").json()
    settings.HITL_GRANT_SIGNING_KEY = base64.urlsafe_b64encode(SEED).decode().rstrip("=")
    assert APIClient().get("/.well-known/hitl-grant-keys").json() == standard


def test_the_grant_ttl_is_the_tokens_lifetime(agent, approver, settings):
    settings.HITL_GRANT_TTL = "PT2M"
    _, grant, read = approved_and_claimed(agent, approver, {"verdict": "APPROVED"})
    claims = verified(grant["token"], key_set())
    decided_at = epoch(read["decidedAt"])
    assert claims["exp"] - decided_at == timedelta(minutes=2).total_seconds()
