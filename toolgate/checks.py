"""System checks of the secret store key, the request-pinning key and the egress allow-list (rules in
approvals/checks.py)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from approvals.checks import TAG, KeyProblem, check_message, hmac_key_problem, strict
from toolgate.outbound import egress, secret_store

FERNET_KEY_HINT = (
    "A Fernet key is 32 random bytes in urlsafe base64 (44 characters); several keys are "
    'comma-separated, newest first. Make one with: python -c "from cryptography.fernet import '
    'Fernet; print(Fernet.generate_key().decode())"'
)


def secrets_key_problem() -> KeyProblem | None:
    """Every key of HITL_SECRETS_KEY is a Fernet key; under the production settings one must be set (in
    development the store falls back to a key derived from SECRET_KEY)."""
    problem = secret_store.key_problem()
    if problem:
        return KeyProblem(1, problem, FERNET_KEY_HINT, unusable=True)
    if strict() and not secret_store.configured_keys():
        return KeyProblem(
            2,
            "HITL_SECRETS_KEY is empty; the production settings need a key of their own",
            FERNET_KEY_HINT,
            unusable=False,
        )
    return None


def pinning_key_problem() -> KeyProblem | None:
    """HITL_PINNING_KEY, when set, keys the request fingerprints (toolgate/gate/pinning.py); empty derives one
    from SECRET_KEY."""
    value = getattr(settings, "HITL_PINNING_KEY", "") or ""
    return hmac_key_problem(setting="HITL_PINNING_KEY", value=value, empty=5, short=5) if value else None


def egress_allow_list_problem() -> KeyProblem | None:
    """Every entry of HITL_HTTP_ALLOW_PRIVATE is a host name, an address or a network in CIDR form
    (toolgate/outbound/egress.py). A bad entry allows nothing, so calls the operator meant to allow would be refused:
    an error under the production settings, a warning in development."""
    problems = egress.allow_list_problems()
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return KeyProblem(
        6,
        f"HITL_HTTP_ALLOW_PRIVATE: {problems[0]}{more}",
        "List host names and networks, comma-separated: payments.internal,10.20.0.0/16 (a network's "
        "address has no bits set beyond its prefix: 10.20.0.0/16, not 10.20.1.0/16)",
        unusable=False,
    )


@checks.register(TAG)
def check_secret_store_key(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    problem = secrets_key_problem()
    return [check_message(problem)] if problem else []


@checks.register(TAG)
def check_pinning_key(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    problem = pinning_key_problem()
    return [check_message(problem)] if problem else []


@checks.register(TAG)
def check_egress_allow_list(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    problem = egress_allow_list_problem()
    return [check_message(problem)] if problem else []
