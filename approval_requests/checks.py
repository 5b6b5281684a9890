"""The system check of the grant tokens' signing key (the rules of every key check: approvals/checks.py).

``HITL_GRANT_SIGNING_KEY``, when set, must be the base64 of a 32-byte Ed25519 seed: anything else signs
no grant, so every claim would fail. It is an error under the production settings (``manage.py check``,
``migrate``, ``qcluster`` and the web process refuse to start) and a warning in development; empty
derives the key from ``SECRET_KEY``.
"""

from __future__ import annotations

from typing import Any

from django.core import checks

from approval_requests import grants
from approvals.checks import TAG, KeyProblem, check_message

GRANT_KEY_CHECK = 7  # hitl.E007 / hitl.W007


def grant_key_problem() -> KeyProblem | None:
    problem = grants.key_problem()
    if problem is None:
        return None
    return KeyProblem(GRANT_KEY_CHECK, problem, grants.KEY_HINT, unusable=True)


@checks.register(TAG)
def check_grant_signing_key(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    problem = grant_key_problem()
    return [check_message(problem)] if problem else []
