"""GET /audit/entries: filters, keyset pagination, and who may read the ledger."""

from __future__ import annotations

import datetime
import uuid

import pytest
import time_machine
from django.contrib.auth.models import Group, User
from django.test import override_settings
from rest_framework.test import APIClient

from approvals.audit import append_audit_entry
from approvals.models import AuditEntry, SubjectType, Verdict
from harnesses.users import client_for, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.approvals.audit_test_urls")]

URL = "/audit/entries"
T0 = datetime.datetime(2026, 11, 30, 10, 0, tzinfo=datetime.UTC)
ENTRY_KEYS = {
    "id",
    "sequence",
    "subjectType",
    "subjectId",
    "conversationId",
    "pauseId",
    "epoch",
    "verb",
    "actor",
    "automated",
    "verdict",
    "note",
    "detail",
    "createdAt",
    "prevHash",
    "entryHash",
}


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
) -> AuditEntry:
    with time_machine.travel(at, tick=False):
        return append_audit_entry(
            subject_type=subject_type,
            subject_id=subject_id,
            verb=verb,
            actor=actor,
            verdict=verdict,
            conversation_id=conversation_id,
            pause_id=pause_id,
            detail={"at": at.isoformat()},
        )


def ids(response) -> list[int]:
    return [entry["id"] for entry in response.json()["results"]]


@pytest.fixture
def ledger() -> dict[str, object]:
    """Two conversations and a discussion (started from the first conversation), over four hours."""
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
        ),
        record(
            T0 + datetime.timedelta(hours=1),
            subject_id=conversation,
            conversation_id=conversation,
            pause_id=pause,
            actor="approver",
            verdict=Verdict.APPROVED,
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


def test_anonymous_caller_gets_401(anon_client: APIClient) -> None:
    response = anon_client.get(URL)
    assert response.status_code == 401
    assert response.json()["code"] == "UNAUTHENTICATED"


def test_plain_user_gets_403(alice_client: APIClient) -> None:
    response = alice_client.get(URL)
    assert response.status_code == 403
    assert response.json()["code"] == "FORBIDDEN"


@pytest.mark.parametrize("who", ["admin_client", "approver_client"])
def test_staff_and_admins_read_the_ledger(request: pytest.FixtureRequest, who: str, ledger) -> None:
    response = request.getfixturevalue(who).get(URL)
    assert response.status_code == 200
    assert ids(response) == [entry.id for entry in ledger["entries"]]
    assert response.json()["next"] is None


def test_admin_group_member_without_staff_flag_reads_the_ledger(db: None) -> None:
    user = make_user("carol")
    user.is_staff = False
    user.save()
    assert client_for(user).get(URL).status_code == 403
    user.groups.add(Group.objects.get_or_create(name="hitl-admin")[0])
    assert client_for(User.objects.get(pk=user.pk)).get(URL).status_code == 200


def test_superuser_reads_the_ledger(db: None) -> None:
    user = make_user("root")
    User.objects.filter(pk=user.pk).update(is_staff=False, is_superuser=True)
    assert client_for(User.objects.get(pk=user.pk)).get(URL).status_code == 200


@override_settings(HITL_ADMIN_GROUP="auditors")
def test_admin_group_comes_from_settings(db: None) -> None:
    user = make_user("dave")
    User.objects.filter(pk=user.pk).update(is_staff=False)
    user.groups.add(Group.objects.get_or_create(name="auditors")[0])
    assert client_for(User.objects.get(pk=user.pk)).get(URL).status_code == 200


def test_deactivated_staff_token_is_refused(admin_user: User, admin_client: APIClient) -> None:
    User.objects.filter(pk=admin_user.pk).update(is_active=False)
    assert admin_client.get(URL).status_code == 401


def test_entry_has_exactly_the_documented_fields(admin_client: APIClient, ledger) -> None:
    first, second = admin_client.get(URL).json()["results"][:2]
    entry: AuditEntry = ledger["entries"][0]
    assert set(first) == ENTRY_KEYS
    assert first == {
        "id": entry.id,
        "sequence": 1,
        "subjectType": "conversation",
        "subjectId": str(ledger["conversation"]),
        "conversationId": str(ledger["conversation"]),
        "pauseId": str(ledger["pause"]),
        "epoch": None,
        "verb": "hitl.pause",
        "actor": "system:pipeline",
        "automated": True,
        "verdict": None,
        "note": "",
        "detail": {"at": "2026-11-30T10:00:00+00:00"},
        "createdAt": "2026-11-30T10:00:00Z",
        "prevHash": "0" * 64,
        "entryHash": entry.entry_hash,
    }
    assert (second["verdict"], second["automated"], second["prevHash"]) == (
        "APPROVED",
        False,
        entry.entry_hash,
    )


def test_conversation_filter_matches_conversation_id_or_subject(admin_client: APIClient, ledger) -> None:
    entries = ledger["entries"]
    response = admin_client.get(URL, {"conversation": str(ledger["conversation"])})
    assert ids(response) == [entries[0].id, entries[1].id, entries[3].id]
    response = admin_client.get(URL, {"conversation": str(ledger["discussion"])})
    assert ids(response) == [entries[3].id]


def test_pause_actor_and_verb_filters(admin_client: APIClient, ledger) -> None:
    entries = ledger["entries"]
    assert ids(admin_client.get(URL, {"pause": str(ledger["pause"])})) == [entries[0].id, entries[1].id]
    assert ids(admin_client.get(URL, {"actor": "system:timeout"})) == [entries[2].id]
    assert ids(admin_client.get(URL, {"verb": "hitl.approval"})) == [entries[1].id]
    assert ids(admin_client.get(URL, {"verb": "hitl.approval", "actor": "bob"})) == []


def test_since_is_inclusive_and_until_exclusive(admin_client: APIClient, ledger) -> None:
    entries = ledger["entries"]
    window = {"since": "2026-11-30T11:00:00Z", "until": "2026-11-30T13:00:00Z"}
    assert ids(admin_client.get(URL, window)) == [entries[1].id, entries[2].id]
    # An offset, and an unencoded '+' that arrives as a space.
    assert ids(admin_client.get(URL, {"since": "2026-11-30T13:00:00+01:00"})) == [
        entries[2].id,
        entries[3].id,
    ]
    assert ids(admin_client.get(f"{URL}?since=2026-11-30T13:00:00+01:00")) == [entries[2].id, entries[3].id]
    # A naive time is UTC.
    assert ids(admin_client.get(URL, {"until": "2026-11-30T10:30:00"})) == [entries[0].id]


def test_pages_follow_next_until_null(admin_client: APIClient, ledger) -> None:
    entries = ledger["entries"]
    first = admin_client.get(URL, {"limit": 3}).json()
    assert [e["id"] for e in first["results"]] == [e.id for e in entries[:3]]
    assert first["next"].startswith("http://testserver/audit/entries?")
    assert f"after={entries[2].id}" in first["next"]

    second = admin_client.get(first["next"]).json()
    assert [e["id"] for e in second["results"]] == [entries[3].id]
    assert second["next"] is None


def test_next_keeps_the_filters(admin_client: APIClient, ledger) -> None:
    entries = ledger["entries"]
    first = admin_client.get(URL, {"conversation": str(ledger["conversation"]), "limit": 1}).json()
    seen = [e["id"] for e in first["results"]]
    page = first
    while page["next"]:
        page = admin_client.get(page["next"]).json()
        seen += [e["id"] for e in page["results"]]
    assert seen == [entries[0].id, entries[1].id, entries[3].id]


def test_limit_is_clamped_not_refused(admin_client: APIClient, ledger) -> None:
    assert len(admin_client.get(URL, {"limit": 0}).json()["results"]) == 1
    assert len(admin_client.get(URL, {"limit": -5}).json()["results"]) == 1
    assert len(admin_client.get(URL, {"limit": 5000}).json()["results"]) == 4


def test_after_skips_seen_entries(admin_client: APIClient, ledger) -> None:
    entries = ledger["entries"]
    assert ids(admin_client.get(URL, {"after": entries[1].id})) == [entries[2].id, entries[3].id]


def test_default_page_is_100_entries(admin_client: APIClient) -> None:
    subject = uuid.uuid4()
    for _ in range(101):
        append_audit_entry(subject_type="conversation", subject_id=subject, verb="hitl.approval", actor="x")
    body = admin_client.get(URL).json()
    assert len(body["results"]) == 100
    assert body["next"] is not None


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"pause": "not-a-uuid"}, "pause"),
        ({"conversation": "123"}, "conversation"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-13-45T99:00:00Z"}, "until"),
        ({"limit": "ten"}, "limit"),
        ({"after": "x"}, "after"),
        # a typed parameter that is present must hold its type: empty is not "no filter"
        ({"until": ""}, "until"),
        ({"since": ""}, "since"),
        ({"pause": ""}, "pause"),
        ({"limit": ""}, "limit"),
        ({"limit": "null"}, "limit"),
        # each parameter at most once
        ({"limit": ["null", "null"]}, "limit"),
        ({"until": ["2026-11-30T10:00:00Z", "2026-12-01T10:00:00Z"]}, "until"),
        ({"actor": ["alice", "bob"]}, "actor"),
    ],
)
def test_bad_filter_value_is_a_400_naming_the_field(
    admin_client: APIClient, params: dict, field: str
) -> None:
    response = admin_client.get(URL, params)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == "BAD_REQUEST"
    assert body["errors"][0]["field"] == field


def test_every_bad_filter_is_named_at_once(admin_client: APIClient) -> None:
    response = admin_client.get(URL, {"pause": "x", "since": "y"})
    assert [error["field"] for error in response.json()["errors"]] == ["pause", "since"]
