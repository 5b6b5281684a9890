"""The audit ledger: appends build a gap-free HMAC chain, and tampering with raw SQL is detected."""

from __future__ import annotations

import uuid
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction
from django.test import override_settings

from approvals.audit import GENESIS_HASH, append_audit_entry, entry_hash_of, verify_ledger
from approvals.models import AuditEntry, AuditHead, SubjectType

pytestmark = pytest.mark.django_db


def append(subject_id: uuid.UUID, count: int, **fields) -> list[AuditEntry]:
    return [
        append_audit_entry(
            subject_type=SubjectType.CONVERSATION,
            subject_id=subject_id,
            verb=fields.get("verb", "hitl.approval"),
            actor=fields.get("actor", "alice"),
            note=f"note {index}",
            detail={"index": index},
            conversation_id=subject_id,
        )
        for index in range(count)
    ]


def tamper(sql: str, params: list | tuple = ()) -> None:
    """Run SQL the way a superuser can: with triggers (and so the append-only guard) switched off."""
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        try:
            cursor.execute(sql, params)
        finally:
            cursor.execute("SET session_replication_role = DEFAULT")


def problems_of(subject_id: uuid.UUID) -> list[str]:
    return [f"#{p.sequence} {p.problem}" for p in verify_ledger(subject_id=subject_id).problems]


def entry_id(subject_id: uuid.UUID, sequence: int) -> int:
    return AuditEntry.objects.get(subject_id=subject_id, sequence=sequence).id


def run_verify_command(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("hitl_audit_verify", *args, stdout=out)
    except CommandError as error:
        return error.returncode, out.getvalue() + str(error)
    return 0, out.getvalue()


def test_appends_build_a_gap_free_chain_per_subject() -> None:
    first, second = uuid.uuid4(), uuid.uuid4()
    entries = append(first, 5)
    append(second, 2)

    assert [e.sequence for e in entries] == [1, 2, 3, 4, 5]
    assert entries[0].prev_hash == GENESIS_HASH
    for previous, entry in zip(entries, entries[1:], strict=False):
        assert entry.prev_hash == previous.entry_hash
    stored = list(AuditEntry.objects.filter(subject_id=first).order_by("sequence"))
    assert [entry_hash_of(e) for e in stored] == [e.entry_hash for e in entries]
    head = AuditHead.objects.get(subject_id=first)
    assert (head.last_sequence, head.last_hash) == (5, entries[-1].entry_hash)
    assert list(AuditEntry.objects.filter(subject_id=second).values_list("sequence", flat=True)) == [1, 2]
    assert verify_ledger().problems == []


def test_system_actors_are_automated_by_default() -> None:
    subject = uuid.uuid4()
    timer = append_audit_entry(
        subject_type="conversation", subject_id=subject, verb="hitl.timeout", actor="system:timeout"
    )
    human = append_audit_entry(
        subject_type="conversation", subject_id=subject, verb="hitl.approval", actor="bob"
    )
    forced = append_audit_entry(
        subject_type="conversation",
        subject_id=subject,
        verb="hitl.approval",
        actor="slack:U1",
        automated=True,
    )
    assert (timer.automated, human.automated, forced.automated) == (True, False, True)


def test_entry_is_part_of_the_callers_transaction() -> None:
    subject = uuid.uuid4()
    with pytest.raises(RuntimeError), transaction.atomic():
        append(subject, 2)
        raise RuntimeError("the decision failed")
    assert not AuditEntry.objects.filter(subject_id=subject).exists()
    assert not AuditHead.objects.filter(subject_id=subject).exists()


def test_detail_with_floats_uuids_and_unicode_verifies_after_the_round_trip() -> None:
    subject = uuid.uuid4()
    append_audit_entry(
        subject_type=SubjectType.DISCUSSION,
        subject_id=subject,
        verb="hitl.tool.request_changed",
        actor="mcp:claude",
        detail={
            "ratio": 0.1,
            "whole": 1.0,
            "huge": 1e300,
            "tiny": 1.5e-10,
            "negativeZero": -0.0,
            "big": 10**30,
            "id": uuid.UUID(int=7),
            "text": 'naïve ✓ "quoted"',
            "nested": {"b": [1, 2.5, None, True], "a": {}},
        },
    )
    assert verify_ledger(subject_id=subject).problems == []


def test_verification_depends_on_the_audit_key() -> None:
    subject = uuid.uuid4()
    append(subject, 2)
    with override_settings(HITL_AUDIT_KEY="another key"):
        problems = problems_of(subject)
    assert len([p for p in problems if "hash mismatch" in p]) == 2


def test_edited_entry_is_detected() -> None:
    subject = uuid.uuid4()
    append(subject, 3)
    tamper("UPDATE approvals_auditentry SET note = 'nothing to see' WHERE id = %s", [entry_id(subject, 2)])

    assert problems_of(subject) == [
        "#2 entry hash mismatch: the entry was edited (or written without the audit key)"
    ]


def test_deleted_middle_entry_is_detected() -> None:
    subject = uuid.uuid4()
    append(subject, 4)
    tamper("DELETE FROM approvals_auditentry WHERE id = %s", [entry_id(subject, 2)])

    assert problems_of(subject) == ["#3 sequence gap: entry 2 is missing (deleted?)"]


def test_deleted_last_entry_is_detected_through_the_head() -> None:
    subject = uuid.uuid4()
    append(subject, 3)
    tamper("DELETE FROM approvals_auditentry WHERE id = %s", [entry_id(subject, 3)])

    assert problems_of(subject) == [
        "#None the head points at entry 3 but the newest entry is 2: the tail was deleted"
    ]


def test_deleting_every_entry_leaves_a_head_without_entries() -> None:
    subject = uuid.uuid4()
    append(subject, 2)
    tamper("DELETE FROM approvals_auditentry WHERE subject_id = %s", [subject])

    [problem] = verify_ledger(subject_id=subject).problems
    assert (problem.subject_id, problem.sequence) == (subject, None)
    assert "no entries" in problem.problem


def test_swapped_sequences_are_detected() -> None:
    subject = uuid.uuid4()
    append(subject, 5)
    second, third = entry_id(subject, 2), entry_id(subject, 3)
    tamper("UPDATE approvals_auditentry SET sequence = 1000 WHERE id = %s", [second])
    tamper("UPDATE approvals_auditentry SET sequence = 2 WHERE id = %s", [third])
    tamper("UPDATE approvals_auditentry SET sequence = 3 WHERE id = %s", [second])

    problems = problems_of(subject)
    assert "#2 prev_hash does not match entry 1's hash: entries reordered or rewired" in problems
    assert "#3 prev_hash does not match entry 2's hash: entries reordered or rewired" in problems
    assert {p.split(" ")[0] for p in problems if "hash mismatch" in p} == {"#2", "#3"}


def test_rewired_prev_hash_is_detected() -> None:
    subject = uuid.uuid4()
    append(subject, 3)
    tamper(
        "UPDATE approvals_auditentry SET prev_hash = %s WHERE id = %s", [GENESIS_HASH, entry_id(subject, 3)]
    )
    problems = problems_of(subject)
    assert "#3 prev_hash does not match entry 2's hash: entries reordered or rewired" in problems


def test_entries_without_a_head_are_detected() -> None:
    subject = uuid.uuid4()
    append(subject, 2)
    AuditHead.objects.filter(subject_id=subject).delete()
    assert problems_of(subject) == ["#None the chain has entries up to 2 but no head"]


def test_verifying_one_subject_ignores_tampering_elsewhere() -> None:
    intact, tampered = uuid.uuid4(), uuid.uuid4()
    append(intact, 2)
    append(tampered, 2)
    tamper("UPDATE approvals_auditentry SET actor = 'mallory' WHERE id = %s", [entry_id(tampered, 1)])

    assert verify_ledger(subject_id=intact).problems == []
    assert verify_ledger(subject_type="conversation", subject_id=intact).problems == []
    assert [p.subject_id for p in verify_ledger().problems] == [tampered]
    report = verify_ledger()
    assert (report.entries_checked, report.subjects_checked) == (4, 2)


def test_trigger_refuses_update() -> None:
    subject = uuid.uuid4()
    [entry] = append(subject, 1)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEntry.objects.filter(pk=entry.pk).update(note="rewritten")
    assert AuditEntry.objects.get(pk=entry.pk).note == "note 0"


def test_trigger_refuses_delete() -> None:
    subject = uuid.uuid4()
    [entry] = append(subject, 1)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEntry.objects.filter(pk=entry.pk).delete()
    assert AuditEntry.objects.filter(pk=entry.pk).exists()


def test_trigger_refuses_truncate_without_the_maintenance_switch() -> None:
    append(uuid.uuid4(), 1)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('hitl.audit_truncate', '', true)")
            cursor.execute("TRUNCATE approvals_auditentry")
    assert AuditEntry.objects.exists()


def test_truncate_is_allowed_with_the_maintenance_switch() -> None:
    append(uuid.uuid4(), 1)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('hitl.audit_truncate', 'allow', true)")
            cursor.execute("TRUNCATE approvals_auditentry")
        assert not AuditEntry.objects.exists()
        transaction.set_rollback(True)


def test_head_stays_updatable() -> None:
    subject = uuid.uuid4()
    append(subject, 1)
    assert AuditHead.objects.filter(subject_id=subject).update(last_sequence=1) == 1


def test_verify_command_exits_0_on_an_intact_ledger() -> None:
    append(uuid.uuid4(), 3)
    append(uuid.uuid4(), 2)

    code, output = run_verify_command()

    assert code == 0
    assert "Checked 5 audit entries in 2 subjects." in output
    assert "Audit ledger intact." in output


def test_verify_command_exits_1_and_names_the_problem() -> None:
    subject = uuid.uuid4()
    append(subject, 3)
    tamper("DELETE FROM approvals_auditentry WHERE id = %s", [entry_id(subject, 2)])

    code, output = run_verify_command()

    assert code == 1
    assert f"conversation {subject} #3: sequence gap: entry 2 is missing" in output
    assert "1 problem(s) found" in output


def test_verify_command_checks_one_subject() -> None:
    intact, tampered = uuid.uuid4(), uuid.uuid4()
    append(intact, 2)
    append(tampered, 2)
    tamper("UPDATE approvals_auditentry SET note = 'x' WHERE id = %s", [entry_id(tampered, 2)])

    assert run_verify_command("--subject-id", str(intact))[0] == 0
    code, output = run_verify_command("--subject-id", str(tampered))
    assert code == 1
    assert "Checked 2 audit entries in 1 subjects." in output
    assert f"conversation {tampered} #2: entry hash mismatch" in output
