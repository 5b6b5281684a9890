"""Service accounts and a filing helper for the approval requests' tests."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from harnesses.users import client_for, make_user


@pytest.fixture
def agent(db) -> User:
    return make_user("refund-bot", "agent")


@pytest.fixture
def other_agent(db) -> User:
    return make_user("deploy-bot", "agent")


def filing(key: str = "run-1/call-1", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "idempotencyKey": key,
        "agent": "refund-bot",
        "action": {"name": "refund", "arguments": {"orderId": "A-1", "amount": 250}},
        "reason": "Refund over 100 EUR",
    }
    body.update(overrides)
    return body


PINNED = {
    "method": "POST",
    "url": "https://payments.example/refunds",
    "headers": {"Content-Type": "application/json", "Authorization": "Bearer sk-live-abcdef123456"},
    "body": '{"orderId":"A-1","amount":250}',
    "secretHeaders": ["Authorization"],
}


def file_request(agent: User, **overrides: Any) -> dict[str, Any]:
    response = client_for(agent).post("/approval-requests", filing(**overrides), format="json")
    assert response.status_code == 201, response.content
    return response.json()
