"""The audit ledger in Django admin: read-only for everyone, filters, chain verification, export."""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from approvals.admin import audit as admin_audit
from approvals.models import AuditEntry, SubjectType, Verdict
from harnesses.users import make_user
from tests.approvals.test_audit_export import T0, body, build_ledger, from_csv, from_jsonl, record

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/approvals/auditentry/"
ADD = CHANGELIST + "add/"
EXPORT = CHANGELIST + "export/"
VERIFY = CHANGELIST + "verify/"


def change_url(entry: AuditEntry) -> str:
    return f"{CHANGELIST}{entry.pk}/change/"


def delete_url(entry: AuditEntry) -> str:
    return f"{CHANGELIST}{entry.pk}/delete/"


def browser(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def superuser() -> User:
    user = make_user("root", "staff")
    User.objects.filter(pk=user.pk).update(is_superuser=True)
    return User.objects.get(pk=user.pk)


@pytest.fixture
def ledger(db: None) -> dict[str, Any]:
    ledger = build_ledger()
    ledger["entries"].append(
        record(
            T0 + datetime.timedelta(days=2),
            subject_id=ledger["other"],
            conversation_id=ledger["other"],
            actor="carol",
            verb="hitl.approval",
            verdict=Verdict.CANCELLED,
        )
    )
    return ledger


@pytest.fixture
def root(db: None) -> Client:
    return browser(superuser())


def shown(response: Any) -> list[int]:
    assert response.status_code == 200, response.content[:500]
    return sorted(entry.pk for entry in response.context["cl"].result_list)


def pks(entries: list[AuditEntry]) -> list[int]:
    return sorted(entry.pk for entry in entries)


def tamper(entry: AuditEntry, **sql_set: str) -> None:
    """Edit an entry the way only a database superuser can: with the append-only triggers off."""
    assignments = ", ".join(f"{column} = %s" for column in sql_set)
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        try:
            cursor.execute(
                f"UPDATE approvals_auditentry SET {assignments} WHERE id = %s", [*sql_set.values(), entry.pk]
            )
        finally:
            cursor.execute("SET session_replication_role = DEFAULT")


# --- read-only for everyone, superusers included ---------------------------------------------------


def test_superuser_cannot_add_an_entry(root: Client, ledger) -> None:
    before = AuditEntry.objects.count()
    assert root.get(ADD).status_code == 403
    assert root.post(ADD, {"verb": "hitl.forged", "actor": "root"}).status_code == 403
    assert AuditEntry.objects.count() == before
    assert f'href="{ADD}"' not in root.get(CHANGELIST).content.decode()


def test_superuser_sees_an_entry_read_only(root: Client, ledger) -> None:
    entry = ledger["entries"][1]
    response = root.get(change_url(entry))
    assert response.status_code == 200
    page = response.content.decode()
    assert 'name="_save"' not in page and 'name="note"' not in page
    assert entry.entry_hash in page and "hitl.approval" in page
    assert "&quot;ship it&quot;" in page  # the note, escaped


def test_posting_to_the_change_page_changes_nothing(root: Client, ledger) -> None:
    entry = ledger["entries"][1]
    forged = {
        "verb": "hitl.forged",
        "actor": "root",
        "note": "forged",
        "verdict": "REJECTED",
        "_save": "Save",
    }
    assert root.post(change_url(entry), forged).status_code == 403
    after = AuditEntry.objects.get(pk=entry.pk)
    assert (after.verb, after.actor, after.note, after.verdict, after.entry_hash) == (
        entry.verb,
        entry.actor,
        entry.note,
        entry.verdict,
        entry.entry_hash,
    )


def test_superuser_cannot_delete_an_entry(root: Client, ledger) -> None:
    entry = ledger["entries"][0]
    assert root.get(delete_url(entry)).status_code == 403
    assert root.post(delete_url(entry), {"post": "yes"}).status_code == 403
    assert AuditEntry.objects.filter(pk=entry.pk).exists()


def test_there_is_no_delete_action(root: Client, ledger) -> None:
    response = root.get(CHANGELIST)
    assert "delete_selected" not in response.content.decode()
    bulk = {"action": "delete_selected", "_selected_action": [e.pk for e in ledger["entries"]], "post": "yes"}
    root.post(CHANGELIST, bulk)
    assert AuditEntry.objects.count() == len(ledger["entries"])


def test_the_audit_admin_refuses_every_write_permission_to_a_superuser(ledger) -> None:
    from django.contrib import admin
    from django.test import RequestFactory

    request = RequestFactory().get(CHANGELIST)
    request.user = superuser()
    model_admin = admin.site._registry[AuditEntry]
    entry = ledger["entries"][0]
    assert model_admin.has_view_permission(request, entry)
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request, entry)
    assert not model_admin.has_delete_permission(request, entry)
    assert "delete_selected" not in model_admin.get_actions(request)


# --- who sees it ----------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["staff", "approver", "admin"])
def test_staff_and_admins_see_the_ledger(role: str, ledger) -> None:
    client = browser(make_user(f"{role}-viewer", role))
    assert shown(client.get(CHANGELIST)) == pks(ledger["entries"])
    assert client.get(change_url(ledger["entries"][0])).status_code == 200
    assert "Audit entries" in client.get("/admin/").content.decode()


@pytest.mark.parametrize("role", ["user", "admin"])
def test_non_staff_cannot_enter_the_admin(role: str, ledger) -> None:
    user = make_user(f"{role}-outsider", role)
    User.objects.filter(pk=user.pk).update(is_staff=False)
    client = browser(User.objects.get(pk=user.pk))
    for url in (
        CHANGELIST,
        change_url(ledger["entries"][0]),
        EXPORT + "?format=csv",
        VERIFY + "?scope=ledger&run=1",
    ):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/admin/login/")


def test_anonymous_is_sent_to_the_login_page(ledger) -> None:
    for url in (CHANGELIST, EXPORT, VERIFY):
        assert Client().get(url)["Location"].startswith("/admin/login/")


# --- filters --------------------------------------------------------------------------------------


def test_filters_by_verb_actor_automated_and_verdict(root: Client, ledger) -> None:
    e = ledger["entries"]
    assert shown(root.get(CHANGELIST, {"verb": "hitl.approval"})) == pks([e[1], e[4]])
    assert shown(root.get(CHANGELIST, {"actor": "system:timeout"})) == pks([e[2]])
    assert shown(root.get(CHANGELIST, {"automated__exact": "1"})) == pks([e[0], e[2]])
    assert shown(root.get(CHANGELIST, {"verdict": "APPROVED"})) == pks([e[1]])
    assert shown(root.get(CHANGELIST, {"verdict": "none"})) == pks([e[0], e[3]])
    assert shown(root.get(CHANGELIST, {"verb": "hitl.approval", "verdict": "CANCELLED"})) == pks([e[4]])


def test_filters_by_subject_as_the_api_does(root: Client, ledger) -> None:
    e = ledger["entries"]
    # A conversation's own chain and the discussion entry that names it.
    assert shown(root.get(CHANGELIST, {"subject": str(ledger["conversation"])})) == pks([e[0], e[1], e[3]])
    assert shown(root.get(CHANGELIST, {"subject": str(ledger["discussion"])})) == pks([e[3]])
    assert shown(root.get(CHANGELIST, {"subject": str(ledger["other"]), "actor": "carol"})) == pks([e[4]])


def test_filters_by_pause(root: Client, ledger) -> None:
    e = ledger["entries"]
    assert shown(root.get(CHANGELIST, {"pause": str(ledger["pause"])})) == pks([e[0], e[1]])


def test_a_malformed_id_matches_nothing_and_says_so(root: Client, ledger) -> None:
    response = root.get(CHANGELIST, {"subject": "not-a-uuid"})
    assert shown(response) == []
    assert any("not a UUID" in str(message) for message in get_messages(response.wsgi_request))


def test_filters_by_date(root: Client, ledger) -> None:
    e = ledger["entries"]
    day = {"created_at__year": "2026", "created_at__month": "11", "created_at__day": "30"}
    assert shown(root.get(CHANGELIST, day)) == pks(e[:4])
    assert shown(root.get(CHANGELIST, {"created_at__year": "2026", "created_at__month": "12"})) == pks([e[4]])


def test_search_takes_any_id_an_actor_or_a_verb(root: Client, ledger) -> None:
    e = ledger["entries"]
    assert shown(root.get(CHANGELIST, {"q": str(ledger["pause"])})) == pks([e[0], e[1]])
    assert shown(root.get(CHANGELIST, {"q": str(ledger["discussion"])})) == pks([e[3]])
    assert shown(root.get(CHANGELIST, {"q": "bob"})) == pks([e[3]])
    assert shown(root.get(CHANGELIST, {"q": "hitl.timeout"})) == pks([e[2]])


def test_typed_in_filters_keep_the_other_filters(root: Client, ledger) -> None:
    page = root.get(CHANGELIST, {"verb": "hitl.approval"}).content.decode()
    assert '<input type="hidden" name="verb" value="hitl.approval">' in page
    assert 'name="subject"' in page and 'name="pause"' in page and 'name="actor"' in page


def test_the_changelist_runs_as_many_queries_for_many_entries_as_for_few(root: Client, ledger) -> None:
    def queries_for_changelist() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert root.get(CHANGELIST).status_code == 200
        return len(captured)

    few = queries_for_changelist()
    for index in range(60):
        record(T0 + datetime.timedelta(minutes=index), subject_id=uuid.uuid4(), pause_id=uuid.uuid4())
    assert queries_for_changelist() == few


# --- chain verification ---------------------------------------------------------------------------


def test_an_entry_page_shows_its_subjects_chain_clean(root: Client, ledger) -> None:
    page = root.get(change_url(ledger["entries"][1])).content.decode()
    assert "audit-chain-clean" in page and "2 entries checked" in page


def test_an_entry_page_shows_a_tampered_chain(root: Client, ledger) -> None:
    tamper(ledger["entries"][0], note="nothing to see here")
    page = root.get(change_url(ledger["entries"][1])).content.decode()
    assert "audit-chain-problems" in page
    assert "entry hash mismatch" in page


def test_verify_the_filtered_subject(root: Client, ledger) -> None:
    subject = str(ledger["conversation"])
    changelist = root.get(CHANGELIST, {"subject": subject}).content.decode()
    assert f"verify/?subject={subject}" in changelist
    page = root.get(VERIFY, {"subject": subject}).content.decode()
    assert "Clean:" in page
    # The conversation's chain and the discussion's, which names it.
    assert "3 entries in 2 subject(s)" in page


def test_verify_shows_the_problems_after_tampering(root: Client, ledger) -> None:
    tamper(ledger["entries"][1], verdict="REJECTED")
    page = root.get(VERIFY, {"subject": str(ledger["conversation"])}).content.decode()
    assert "problem(s) found" in page
    assert f"conversation {ledger['conversation']} #2: entry hash mismatch" in page
    other = root.get(VERIFY, {"subject": str(ledger["other"])}).content.decode()
    assert "Clean:" in other


def test_verify_notices_a_deleted_entry(root: Client, ledger) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        try:
            cursor.execute("DELETE FROM approvals_auditentry WHERE id = %s", [ledger["entries"][0].pk])
        finally:
            cursor.execute("SET session_replication_role = DEFAULT")
    page = root.get(VERIFY, {"pause": str(ledger["pause"])}).content.decode()
    assert "sequence gap: entry 1 is missing" in page


def test_the_whole_ledger_is_verified_only_on_request(root: Client, ledger) -> None:
    note = root.get(VERIFY, {"scope": "ledger"}).content.decode()
    assert "Verify the whole ledger" in note and "Clean:" not in note
    clean = root.get(VERIFY, {"scope": "ledger", "run": "1"}).content.decode()
    assert "Verified the whole ledger" in clean and "Clean:" in clean
    assert f"{len(ledger['entries'])} entries in 3 subject(s)" in clean
    tamper(ledger["entries"][2], actor="someone-else")
    tampered = root.get(VERIFY, {"scope": "ledger", "run": "1"}).content.decode()
    assert f"conversation {ledger['other']} #1: entry hash mismatch" in tampered


def test_verifying_a_selection_of_too_many_subjects_asks_to_narrow_it(
    root: Client, ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(admin_audit, "MAX_VERIFIED_SUBJECTS", 2)
    page = root.get(VERIFY, {"verb": "hitl.approval", "actor": ""}).content.decode()
    assert "Clean:" in page  # two subjects
    page = root.get(VERIFY, {"automated__exact": "0"}).content.decode()
    assert "more than 2 subjects" in page


def test_staff_verify_too(ledger) -> None:
    client = browser(make_user("staff-verifier", "staff"))
    assert "Clean:" in client.get(VERIFY, {"subject": str(ledger["other"])}).content.decode()


# --- export ---------------------------------------------------------------------------------------


def test_the_changelist_links_to_an_export_of_its_filters(root: Client, ledger) -> None:
    page = root.get(CHANGELIST, {"verb": "hitl.approval", "p": "1"}).content.decode()
    assert 'href="/admin/approvals/auditentry/export/?verb=hitl.approval&amp;format=csv"' in page
    assert 'href="/admin/approvals/auditentry/export/?verb=hitl.approval&amp;format=jsonl"' in page


def test_a_stray_parameter_named_like_ours_does_not_break_the_list(root: Client, ledger) -> None:
    assert root.get(CHANGELIST, {"format": "csv"}).status_code == 302  # the admin's "bad filter" redirect
    assert root.get(CHANGELIST, {"view": "x", "scope": "y"}).status_code == 302


def test_admin_export_holds_the_filtered_entries(root: Client, ledger) -> None:
    e = ledger["entries"]
    response = root.get(EXPORT, {"format": "csv", "verb": "hitl.approval"})
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith('attachment; filename="audit-entries-')
    exported = from_csv(body(response))
    assert [entry["id"] for entry in exported] == [e[1].id, e[4].id]  # oldest first
    assert exported[0]["entryHash"] == e[1].entry_hash and exported[0]["verdict"] == "APPROVED"


def test_admin_export_follows_typed_in_filters_search_and_dates(root: Client, ledger) -> None:
    e = ledger["entries"]
    by_subject = from_jsonl(
        body(root.get(EXPORT, {"format": "jsonl", "subject": str(ledger["conversation"])}))
    )
    assert [entry["id"] for entry in by_subject] == [e[0].id, e[1].id, e[3].id]
    assert by_subject[2]["subjectType"] == SubjectType.DISCUSSION
    searched = from_jsonl(body(root.get(EXPORT, {"format": "jsonl", "q": "bob"})))
    assert [entry["id"] for entry in searched] == [e[3].id]
    dated = from_csv(
        body(root.get(EXPORT, {"format": "csv", "created_at__year": "2026", "created_at__month": "12"}))
    )
    assert [entry["id"] for entry in dated] == [e[4].id]


def test_admin_export_without_filters_is_the_whole_ledger(root: Client, ledger) -> None:
    exported = from_jsonl(body(root.get(EXPORT, {"format": "jsonl"})))
    assert [entry["id"] for entry in exported] == [entry.id for entry in ledger["entries"]]
    assert json.loads(json.dumps(exported[0]["detail"]))["kind"] == "RULE"


def test_admin_export_refuses_an_unknown_format_or_filter(root: Client, ledger) -> None:
    assert root.get(EXPORT, {"format": "xlsx"}).status_code == 400
    assert root.get(EXPORT, {"format": "csv", "no_such_field": "1"}).status_code == 400


def test_staff_export_from_the_admin(ledger) -> None:
    client = browser(make_user("staff-exporter", "staff"))
    assert len(from_csv(body(client.get(EXPORT, {"format": "csv"})))) == len(ledger["entries"])


def test_the_automated_column_is_a_neutral_badge_not_a_red_cross(root: Client, ledger) -> None:
    """Django's boolean icons read as passed/failed; who acted is neither."""
    text = root.get(CHANGELIST).content.decode()
    automated = sum(1 for entry in ledger["entries"] if entry.automated)
    assert 0 < automated < len(ledger["entries"])
    assert text.count('class="hitl-actor-kind hitl-actor-automated"') == automated
    assert text.count('class="hitl-actor-kind hitl-actor-person"') == len(ledger["entries"]) - automated
    assert "icon-no.svg" not in text and "icon-yes.svg" not in text
