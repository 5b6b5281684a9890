"""Service accounts (role ``agent``) with API tokens, and the approval request they file, for the
approval-request benches (bench/approval_requests.py).

The accounts are made with the ORM in the bench process (Django is set up there against the bench
database once the stack has started: ``_stack.account_bot_document``), with the role the
``hitl_user`` command gives, so sixteen of them cost a few milliseconds instead of sixteen
``manage.py`` runs. A filed request pins the exact HTTP request the agent sends once approved, with a
secret header, as an agent calling a payments API would.
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx

# The HTTP request an approved call sends: claimed byte for byte (its Authorization never stored).
PINNED = {
    "method": "POST",
    "url": "https://payments.example/refunds",
    "headers": {"Content-Type": "application/json", "Authorization": "Bearer sk-live-bench-0123456789"},
    "body": '{"orderId":"A-1","amount":250}',
    "secretHeaders": ["Authorization"],
}
OUTCOME = {"status": "succeeded", "httpStatus": 201, "summary": "refunded"}


def service_account_tokens(prefix: str, count: int) -> list[str]:
    """The API tokens of ``count`` service accounts ``<prefix>-01`` … (made when missing)."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from approvals.management.commands.hitl_user import apply_role

    tokens = []
    for number in range(1, count + 1):
        user, created = get_user_model().objects.get_or_create(username=f"{prefix}-{number:02d}")
        if created:
            user.set_unusable_password()
            apply_role(user, "agent")
            user.save()
        tokens.append(Token.objects.get_or_create(user=user)[0].key)
    return tokens


def token_client(url: str, token: str) -> httpx.Client:
    """A keep-alive httpx client on ``url`` signed in with the API token ``token``."""
    return httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}, timeout=60.0)


def filing(key: str, *, callback_url: str | None = None) -> dict[str, Any]:
    """The body of ``POST /approval-requests``: a refund, pinned, under the idempotency key ``key``."""
    body: dict[str, Any] = {
        "idempotencyKey": key,
        "agent": "refund-bot",
        "action": {"name": "refund", "arguments": {"orderId": "A-1", "amount": 250}},
        "reason": "Refund over 100 EUR",
        "request": PINNED,
    }
    if callback_url is not None:
        body["callbackUrl"] = callback_url
    return body


def run_id() -> str:
    """A prefix that keeps this run's idempotency keys apart from an earlier run's on the same database."""
    return f"{int(time.time() * 1000):x}-{os.getpid()}"


def load() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]
