"""GET /audit/export and manage.py hitl_audit_export: the API's entries as CSV or JSON Lines, streamed."""

from __future__ import annotations

import csv
import datetime
import io
import json
import uuid
from typing import Any

import pytest
import time_machine
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import AsyncClient
from rest_framework.test import APIClient

from approvals.audit import append_audit_entry
from approvals.audit_export import EXPORT_COLUMNS, csv_chunks, export_rows, jsonl_chunks
from approvals.models import AuditEntry, SubjectType, Verdict
from harnesses.users import client_for, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.approvals.audit_test_urls")]

EXPORT = "/audit/export"
ENTRIES = "/audit/entries"
T0 = datetime.datetime(2026, 11, 30, 10, 0, tzinfo=datetime.UTC)
AWKWARD_NOTE = 'Ok, "ship it";\nsecond line, ünïcödé — and =SUM(A1)'


def record(
    at: datetime.datetime,
    *,
    subject_id: uuid.UUID,
    verb: str = "hitl.approval",
    actor: str = "approver",
    subject_type: str = SubjectType.CONVERSATION,
    conversation_id: uuid.UUID | None = None,
    pause_id: uuid.UUID | None = None,
    verdict: str = "",
    note: str = "",
    detail: dict[str, Any] | None = None,
) -> AuditEntry:
    with time_machine.travel(at, tick=False):
        return append_audit_entry(
            subject_type=subject_type,
            subject_id=subject_id,
            verb=verb,
            actor=actor,
            verdict=verdict,
            note=note,
            conversation_id=conversation_id,
            pause_id=pause_id,
            epoch=uuid.uuid4() if pause_id else None,
            detail={"at": at.isoformat()} if detail is None else detail,
        )


def build_ledger() -> dict[str, Any]:
    """Two conversations and a discussion (started from the first), over four hours."""
    conversation, other, discussion = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    pause, other_pause = uuid.uuid4(), uuid.uuid4()
    entries = [
        record(
            T0,
            subject_id=conversation,
            conversation_id=conversation,
            pause_id=pause,
            verb="hitl.pause",
            actor="system:pipeline",
            detail={"kind": "RULE", "tools": [], "nested": {"n": 1.5, "ok": True, "none": None}},
        ),
        record(
            T0 + datetime.timedelta(hours=1, microseconds=123456),
            subject_id=conversation,
            conversation_id=conversation,
            pause_id=pause,
            actor="approver",
            verdict=Verdict.APPROVED,
            note=AWKWARD_NOTE,
        ),
        record(
            T0 + datetime.timedelta(hours=2),
            subject_id=other,
            conversation_id=other,
            pause_id=other_pause,
            actor="system:timeout",
            verb="hitl.timeout",
            verdict=Verdict.REJECTED,
        ),
        record(
            T0 + datetime.timedelta(hours=3),
            subject_id=discussion,
            subject_type=SubjectType.DISCUSSION,
            conversation_id=conversation,
            actor="bob",
            verb="hitl.group.cancel",
        ),
    ]
    return {
        "conversation": conversation,
        "other": other,
        "discussion": discussion,
        "pause": pause,
        "entries": entries,
    }


@pytest.fixture
def ledger(db: None) -> dict[str, Any]:
    return build_ledger()


def api_entries(client: APIClient, **filters: str) -> list[dict[str, Any]]:
    response = client.get(ENTRIES, {**filters, "limit": 1000})
    assert response.status_code == 200, response.content
    return response.json()["results"]


def body(response: Any) -> str:
    return b"".join(response.streaming_content).decode("utf-8")


def from_csv(text: str) -> list[dict[str, Any]]:
    """CSV rows back into API entries: typed id and sequence, null for an empty cell, JSON detail."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    assert tuple(reader.fieldnames or ()) == EXPORT_COLUMNS
    entries = []
    for row in reader:
        entry: dict[str, Any] = {name: (value if value != "" else None) for name, value in row.items()}
        entry["id"], entry["sequence"] = int(row["id"]), int(row["sequence"])
        entry["automated"] = {"true": True, "false": False}[row["automated"]]
        entry["note"] = row["note"]
        entry["detail"] = json.loads(row["detail"])
        entries.append(entry)
    return entries


def from_jsonl(text: str) -> list[dict[str, Any]]:
    assert text.endswith("\n") or text == ""
    return [json.loads(line) for line in text.splitlines()]


PARSE = {"csv": from_csv, "jsonl": from_jsonl}


# --- contents ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("export_format", ["csv", "jsonl"])
def test_export_holds_exactly_the_api_entries(admin_client: APIClient, ledger, export_format: str) -> None:
    response = admin_client.get(EXPORT, {"format": export_format})
    assert response.status_code == 200
    assert response.streaming
    assert PARSE[export_format](body(response)) == api_entries(admin_client)


def test_csv_is_an_attachment_with_a_header_and_crlf_rows(admin_client: APIClient, ledger) -> None:
    response = admin_client.get(EXPORT, {"format": "csv"})
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="audit-entries-')
    assert response["Content-Disposition"].endswith('.csv"')
    text = body(response)
    assert text.startswith(",".join(EXPORT_COLUMNS) + "\r\n")
    assert (
        '"Ok, ""ship it"";\nsecond line' in text
    )  # quoted, quotes doubled, the newline kept inside the cell
    assert from_csv(text)[1]["note"] == AWKWARD_NOTE  # verbatim, formula-looking text included


def test_jsonl_is_one_entry_object_per_line(admin_client: APIClient, ledger) -> None:
    response = admin_client.get(EXPORT, {"format": "jsonl"})
    assert response["Content-Type"] == "application/jsonl; charset=utf-8"
    assert response["Content-Disposition"].endswith('.jsonl"')
    lines = body(response).splitlines()
    assert len(lines) == len(ledger["entries"])
    first = json.loads(lines[0])
    assert list(first) == list(EXPORT_COLUMNS)
    assert first["detail"] == {"kind": "RULE", "tools": [], "nested": {"n": 1.5, "ok": True, "none": None}}
    assert json.loads(lines[1])["createdAt"] == "2026-11-30T11:00:00.123456Z"


def test_format_defaults_to_csv(admin_client: APIClient, ledger) -> None:
    response = admin_client.get(EXPORT)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")


def test_an_accept_header_for_the_file_type_is_not_refused(admin_client: APIClient, ledger) -> None:
    response = admin_client.get(EXPORT, {"format": "csv"}, HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    assert len(from_csv(body(response))) == len(ledger["entries"])


def test_empty_selection_is_a_header_only_csv_and_an_empty_jsonl(admin_client: APIClient, ledger) -> None:
    assert (
        body(admin_client.get(EXPORT, {"format": "csv", "actor": "nobody"}))
        == ",".join(EXPORT_COLUMNS) + "\r\n"
    )
    assert body(admin_client.get(EXPORT, {"format": "jsonl", "actor": "nobody"})) == ""


@pytest.mark.parametrize("export_format", ["csv", "jsonl"])
@pytest.mark.parametrize(
    "filters",
    [
        {"conversation": "conversation"},
        {"conversation": "discussion"},
        {"pause": "pause"},
        {"actor": "system:timeout"},
        {"verb": "hitl.approval"},
        {"since": "2026-11-30T11:00:00Z"},
        {"until": "2026-11-30T12:00:00Z"},
        {
            "since": "2026-11-30T11:00:00+00:00",
            "until": "2026-11-30T13:00:00Z",
            "conversation": "conversation",
        },
    ],
)
def test_export_filters_select_what_the_entries_endpoint_selects(
    admin_client: APIClient, ledger, export_format: str, filters: dict[str, str]
) -> None:
    params = {name: str(ledger.get(value, value)) for name, value in filters.items()}
    expected = api_entries(admin_client, **params)
    assert 0 < len(expected) < len(ledger["entries"])
    response = admin_client.get(EXPORT, {**params, "format": export_format})
    assert PARSE[export_format](body(response)) == expected


def test_export_is_oldest_first(admin_client: APIClient, ledger) -> None:
    exported = from_jsonl(body(admin_client.get(EXPORT, {"format": "jsonl"})))
    assert [entry["id"] for entry in exported] == [entry.id for entry in ledger["entries"]]


# --- errors and access -------------------------------------------------------------------------------


@pytest.mark.parametrize("bad_format", ["xlsx", "json", "CSVX"])
def test_unknown_format_is_a_400_problem(admin_client: APIClient, bad_format: str) -> None:
    response = admin_client.get(EXPORT, {"format": bad_format})
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "BAD_REQUEST"
    assert [error["field"] for error in problem["errors"]] == ["format"]


def test_every_bad_filter_is_named_in_one_400(admin_client: APIClient) -> None:
    response = admin_client.get(
        EXPORT, {"format": "pdf", "conversation": "nope", "pause": "x", "since": "yesterday"}
    )
    assert response.status_code == 400
    assert {error["field"] for error in response.json()["errors"]} == {
        "format",
        "conversation",
        "pause",
        "since",
    }


def test_anonymous_caller_gets_401(anon_client: APIClient, ledger) -> None:
    response = anon_client.get(EXPORT, {"format": "csv"})
    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "UNAUTHENTICATED"


def test_plain_user_gets_403(alice_client: APIClient, ledger) -> None:
    response = alice_client.get(EXPORT, {"format": "csv"})
    assert response.status_code == 403
    assert response.json()["code"] == "FORBIDDEN"


def test_bad_format_from_a_plain_user_is_still_403(alice_client: APIClient) -> None:
    assert alice_client.get(EXPORT, {"format": "xlsx"}).status_code == 403


@pytest.mark.parametrize("who", ["admin_client", "approver_client"])
def test_staff_and_admins_export(request: pytest.FixtureRequest, who: str, ledger) -> None:
    response = request.getfixturevalue(who).get(EXPORT, {"format": "jsonl"})
    assert response.status_code == 200
    assert len(from_jsonl(body(response))) == len(ledger["entries"])


def test_admin_group_member_without_staff_flag_exports(ledger) -> None:
    user = make_user("auditor", "admin")
    User.objects.filter(pk=user.pk).update(is_staff=False)
    assert client_for(User.objects.get(pk=user.pk)).get(EXPORT).status_code == 200


def test_browser_session_of_staff_exports(ledger) -> None:
    client = APIClient()
    client.force_login(make_user("staffer", "approver"))
    assert client.get(EXPORT, {"format": "csv"}).status_code == 200


# --- the async path (what uvicorn runs) ------------------------------------------------------------


def test_under_asgi_the_body_is_an_async_generator_with_the_same_bytes(admin_user: User, ledger) -> None:
    sync_client = APIClient()
    sync_client.force_login(admin_user)
    expected = body(sync_client.get(EXPORT, {"format": "csv"}))

    async def export_over_asgi() -> tuple[bool, str]:
        client = AsyncClient()
        await client.aforce_login(admin_user)
        response = await client.get(EXPORT, {"format": "csv"})
        assert response.status_code == 200
        parts = [part async for part in response.streaming_content]
        return response.is_async, b"".join(parts).decode()

    # async_to_sync on this thread runs the ORM's thread-sensitive calls here, inside the test's transaction.
    is_async, text = async_to_sync(export_over_asgi)()
    assert is_async
    assert text == expected


def test_chunk_generators_cover_every_row_in_bounded_pieces(ledger) -> None:
    for index in range(3000):  # more than one fetch of the cursor
        record(T0 + datetime.timedelta(days=1, seconds=index), subject_id=uuid.uuid4(), note="x" * 40)

    async def collect(chunks: Any) -> list[str]:
        return [piece async for piece in chunks]

    for chunks, parse in ((csv_chunks, from_csv), (jsonl_chunks, from_jsonl)):
        pieces = async_to_sync(collect)(chunks(export_rows(AuditEntry.objects.all())))
        assert len(pieces) > 2
        assert max(len(piece) for piece in pieces) < 80 * 1024
        assert len(parse("".join(pieces))) == 3000 + len(ledger["entries"])


# --- manage.py hitl_audit_export ------------------------------------------------------------------


@pytest.mark.parametrize("export_format", ["csv", "jsonl"])
def test_command_writes_the_api_entries_to_stdout(
    admin_client: APIClient, ledger, export_format: str
) -> None:
    out = io.StringIO()
    call_command("hitl_audit_export", "--format", export_format, stdout=out)
    assert PARSE[export_format](out.getvalue()) == api_entries(admin_client)


def test_command_writes_a_filtered_file(admin_client: APIClient, ledger, tmp_path) -> None:
    target = tmp_path / "approvals.csv"
    call_command(
        "hitl_audit_export",
        "--format=csv",
        f"--output={target}",
        f"--conversation={ledger['conversation']}",
        "--verb=hitl.approval",
        "--since=2026-11-30T10:30:00Z",
    )
    exported = from_csv(target.read_text(encoding="utf-8"))
    assert exported == api_entries(
        admin_client,
        conversation=str(ledger["conversation"]),
        verb="hitl.approval",
        since="2026-11-30T10:30:00Z",
    )
    assert [entry["note"] for entry in exported] == [AWKWARD_NOTE]


def test_command_default_format_is_csv(ledger) -> None:
    out = io.StringIO()
    call_command("hitl_audit_export", "--actor=bob", stdout=out)
    assert [entry["actor"] for entry in from_csv(out.getvalue())] == ["bob"]


def test_command_refuses_bad_filters_naming_each(ledger) -> None:
    with pytest.raises(CommandError) as refused:
        call_command("hitl_audit_export", "--pause=nope", "--until=later", stdout=io.StringIO())
    assert "pause" in str(refused.value) and "until" in str(refused.value)


def test_command_refuses_an_unknown_format(ledger) -> None:
    with pytest.raises(CommandError):
        call_command("hitl_audit_export", "--format=xml", stdout=io.StringIO())
