"""Audit filters PostgreSQL would reject are a 400 naming the parameter, on /audit/entries and before the
first byte of /audit/export (never a 200 whose stream breaks off)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.test import AsyncClient
from rest_framework.test import APIClient

from tests.approvals.test_audit_export import ENTRIES, EXPORT, body, build_ledger, from_jsonl

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.approvals.audit_test_urls")]


@pytest.fixture
def ledger(db: None) -> dict[str, Any]:
    return build_ledger()


# "+" of an offset: encoded (%2B) it stays a "+", unencoded it arrives as a space; both are read as offsets.
BAD_OFFSETS = [
    "2026-11-30T10:00:00%2B16:00",
    "2026-11-30T10:00:00+16:00",
    "2026-11-30T10:00:00-16:00",
    "2026-11-30T10:00:00%2B23:59",
]


@pytest.mark.parametrize("value", BAD_OFFSETS)
@pytest.mark.parametrize("name", ["since", "until"])
def test_audit_since_bad_offset_is_400(admin_client: APIClient, ledger, name: str, value: str) -> None:
    for url in (ENTRIES, EXPORT):
        response = admin_client.get(f"{url}?{name}={value}")
        assert response.status_code == 400, (url, response.content)
        assert response["Content-Type"] == "application/problem+json"
        assert [e["field"] for e in response.json()["errors"]] == [name]
        assert "UTC offset" in response.json()["detail"]


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-30T10:00:00%2B15:59",
        "2026-11-30T10:00:00+15:59",
        "2026-11-30T10:00:00-15:59",
        "2026-11-30T10:00:00%2B05:30",
    ],
)
def test_audit_offsets_postgresql_accepts_are_accepted(admin_client: APIClient, ledger, value: str) -> None:
    assert admin_client.get(f"{ENTRIES}?since={value}").status_code == 200
    assert admin_client.get(f"{EXPORT}?since={value}").status_code == 200


@pytest.mark.parametrize("name", ["actor", "verb"])
def test_audit_text_filter_with_a_nul_byte_is_400(admin_client: APIClient, ledger, name: str) -> None:
    for url in (ENTRIES, EXPORT):
        response = admin_client.get(f"{url}?{name}=app%00rover")
        assert response.status_code == 400, (url, response.content)
        assert [e["field"] for e in response.json()["errors"]] == [name]


BAD_EXPORT_QUERY = (
    "format=xml&limit=ten&after=x&since=2026-11-30T10:00:00%2B16:00&until=tomorrow"
    "&actor=a%00&verb=v%00&pause=p&conversation=c"
)


def test_audit_export_validates_before_streaming(admin_user: User, ledger) -> None:
    """Under ASGI (what uvicorn runs) a streamed 200 is committed before the first row is read: every
    parameter must be refused before that."""

    async def export(query: str) -> Any:
        client = AsyncClient()
        await client.aforce_login(admin_user)
        return await client.get(f"{EXPORT}?{query}")

    response = async_to_sync(export)(BAD_EXPORT_QUERY)
    assert response.status_code == 400
    assert not response.streaming
    assert response["Content-Type"] == "application/problem+json"
    assert {e["field"] for e in response.json()["errors"]} == {
        "format",
        "limit",
        "after",
        "since",
        "until",
        "actor",
        "verb",
        "pause",
        "conversation",
    }


def test_audit_export_takes_after_and_limit_like_the_entries(admin_client: APIClient, ledger) -> None:
    ids = [entry.id for entry in ledger["entries"]]
    exported = from_jsonl(body(admin_client.get(EXPORT, {"format": "jsonl", "after": ids[0], "limit": 2})))
    assert [entry["id"] for entry in exported] == ids[1:3]
    everything = from_jsonl(body(admin_client.get(EXPORT, {"format": "jsonl", "limit": 0, "after": -5})))
    assert [entry["id"] for entry in everything] == ids[:1]  # clamped: limit 1, after 0
    huge = admin_client.get(EXPORT, {"format": "jsonl", "limit": 10**30, "after": 10**30})
    assert huge.status_code == 200 and from_jsonl(body(huge)) == []
