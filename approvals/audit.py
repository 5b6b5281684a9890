"""The append-only audit ledger: HMAC-chained entries per subject, and the verifier that checks them.

Entries of one subject (a conversation or a group discussion) form a chain: entry N carries the
``entry_hash`` of entry N-1 as its ``prev_hash``, and its own ``entry_hash`` is an HMAC-SHA256, keyed by
``settings.HITL_AUDIT_KEY``, over every other field. The subject's ``AuditHead`` row remembers the newest
entry, so a deleted tail shows too. A database trigger (migration 0002) refuses UPDATE, DELETE and
TRUNCATE; a superuser can still bypass triggers, and only the chain detects that.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import hmac
import itertools
import json
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

from approvals.models import AuditEntry, AuditHead, SubjectType
from common import rows

GENESIS_HASH = "0" * 64

# The fields an entry's HMAC covers: all of them except ``id`` and ``entry_hash``.
HASHED_FIELDS = (
    "subject_type",
    "subject_id",
    "sequence",
    "conversation_id",
    "pause_id",
    "epoch",
    "verb",
    "actor",
    "automated",
    "verdict",
    "note",
    "detail",
    "created_at",
    "prev_hash",
)
_VERIFIED_FIELDS = (*HASHED_FIELDS, "entry_hash")

VERIFY_CHUNK_SIZE = 2000


@dataclass(frozen=True)
class AuditDraft:
    """An entry before its place in the chain is known: every field but ``sequence``, ``prev_hash``,
    ``entry_hash`` and ``created_at`` (``audit_draft`` checks and normalizes them)."""

    subject_type: str
    subject_id: uuid.UUID
    verb: str
    actor: str
    automated: bool
    verdict: str
    note: str
    detail: dict[str, Any]
    conversation_id: uuid.UUID | None
    pause_id: uuid.UUID | None
    epoch: uuid.UUID | None

    def after(self, last_sequence: int, last_hash: str) -> AuditEntry:
        """The entry that follows a head at ``last_sequence`` with ``last_hash``, created now, hashed."""
        entry = AuditEntry(
            subject_type=self.subject_type,
            subject_id=self.subject_id,
            sequence=last_sequence + 1,
            conversation_id=self.conversation_id,
            pause_id=self.pause_id,
            epoch=self.epoch,
            verb=self.verb,
            actor=self.actor,
            automated=self.automated,
            verdict=self.verdict,
            note=self.note,
            detail=self.detail,
            created_at=timezone.now(),
            prev_hash=last_hash or GENESIS_HASH,
        )
        entry.entry_hash = entry_hash_of(entry)
        return entry


def audit_draft(
    *,
    subject_type: str,
    subject_id: uuid.UUID,
    verb: str,
    actor: str,
    automated: bool | None = None,
    verdict: str = "",
    note: str = "",
    detail: dict[str, Any] | None = None,
    conversation_id: uuid.UUID | None = None,
    pause_id: uuid.UUID | None = None,
    epoch: uuid.UUID | None = None,
) -> AuditDraft:
    """The entry ``append_audit_entry`` takes these arguments for, before its place in the chain."""
    if subject_type not in SubjectType.values:
        raise ValueError(f"unknown audit subject type {subject_type!r}")
    # Plain str, not a TextChoices member: the hash must see exactly what reads back.
    subject_type, verb, actor, verdict = str(subject_type), str(verb), str(actor), str(verdict or "")
    subject_id = _as_uuid(subject_id)
    return AuditDraft(
        subject_type=subject_type,
        subject_id=subject_id,
        verb=verb,
        actor=actor,
        automated=actor.startswith("system:") if automated is None else automated,
        verdict=verdict,
        note=note or "",
        detail=_as_stored_json(detail or {}),
        conversation_id=_as_uuid_or_none(
            subject_id
            if conversation_id is None and subject_type == SubjectType.CONVERSATION
            else conversation_id
        ),
        pause_id=_as_uuid_or_none(pause_id),
        epoch=_as_uuid_or_none(epoch),
    )


def append_audit_entry(*, head: AuditHead | None = None, **fields: Any) -> AuditEntry:
    """Append one entry to the subject's chain, in the caller's transaction.

    Call it inside the transaction that makes the change it records, so both commit or neither does
    (outside one it runs in a transaction of its own). Appends to one subject serialize on the
    subject's ``AuditHead`` row lock, held until the caller commits: keep that transaction short, and
    when one transaction appends to several subjects, append in a fixed order to avoid deadlocks.
    ``fields``: those of ``audit_draft``. ``automated`` defaults to whether the actor is a ``system:``
    actor. ``conversation_id`` files the entry under a conversation; an entry whose subject is a
    conversation is filed under it without being told.
    ``head``: the subject's head, already locked in this transaction by a statement of the caller's that
    ran ``lock_head_sql()`` (``locked_head_from`` its row), so the lock costs no statement of its own.
    """
    return append_draft(audit_draft(**fields), head=head)


def append_draft(draft: AuditDraft, *, head: AuditHead | None = None) -> AuditEntry:
    """``append_audit_entry`` of a draft."""
    with transaction.atomic(savepoint=False):
        if head is None:
            head = _locked_head(draft.subject_type, draft.subject_id)
        elif (head.subject_type, head.subject_id) != (draft.subject_type, draft.subject_id):
            raise ValueError("the locked audit head is another subject's")
        entry = draft.after(head.last_sequence, head.last_hash)
        if connection.vendor == "postgresql":
            _insert_and_advance(entry, head)
        else:
            entry.save(force_insert=True)
            AuditHead.objects.filter(pk=head.pk).update(
                last_sequence=entry.sequence, last_hash=entry.entry_hash
            )
    return entry


@functools.cache
def _advance_head_sql() -> str:
    """The entry's INSERT (``common.rows.insert_sql``: every field but the key, which comes back) and the
    head's move to it, as one statement."""
    insert = rows.insert_sql(AuditEntry, True)
    head = connection.ops.quote_name(AuditHead._meta.db_table)
    return (
        f"WITH new_entry AS ({insert}) "  # nosec B608  # identifiers from model metadata, values are parameters
        f"UPDATE {head} SET last_sequence = %s, last_hash = %s WHERE id = %s RETURNING (SELECT id FROM new_entry)"
    )


def _insert_and_advance(entry: AuditEntry, head: AuditHead) -> None:
    """Insert the entry and move its subject's head to it in one statement (each field prepared as
    ``entry.save()`` prepares it, ``common.rows.insert_values``)."""
    fields = [field for field in AuditEntry._meta.concrete_fields if not field.primary_key]
    params = rows.insert_values(entry, fields)
    row = rows.fetch_one(_advance_head_sql(), [*params, entry.sequence, entry.entry_hash, head.pk])
    if row is None:  # the head row is locked by this transaction: it cannot have gone
        raise RuntimeError(f"audit head {head.pk} vanished while locked")
    entry.pk = row[0]
    entry._state.adding, entry._state.db = False, connection.alias


_LOCK_HEAD_SQL = (
    "INSERT INTO {table} (subject_type, subject_id, last_sequence, last_hash) {subject} "
    "ON CONFLICT (subject_type, subject_id) DO UPDATE SET last_sequence = {table}.last_sequence "
    "RETURNING id, last_sequence, last_hash"
)


def lock_head_sql(subject_of: str = "") -> str:
    """The statement that creates the subject's head row if missing and locks it until the transaction
    ends, answering its id, last sequence and last hash: for a caller that runs it inside a statement of
    its own (a data-modifying WITH), then appends with ``append_audit_entry(head=locked_head_from(...))``.
    The subject: its type and id as parameters, or ``subject_of`` the name of a part of the caller's
    statement whose one row has ``subject_type`` and ``subject_id`` columns (which then runs first)."""
    subject = (
        f"SELECT subject_type, subject_id, 0, '' FROM {subject_of}"  # nosec B608  # a part's name from code
        if subject_of
        else "VALUES (%s, %s, 0, '')"
    )
    return _LOCK_HEAD_SQL.format(table=AuditHead._meta.db_table, subject=subject)


def locked_head_from(subject_type: str, subject_id: uuid.UUID, values: Sequence[Any]) -> AuditHead:
    """The head ``lock_head_sql()`` answered (its id, last sequence and last hash)."""
    head_id, last_sequence, last_hash = values
    return AuditHead(
        pk=head_id,
        subject_type=str(subject_type),
        subject_id=_as_uuid(subject_id),
        last_sequence=last_sequence,
        last_hash=last_hash,
    )


def _locked_head(subject_type: str, subject_id: uuid.UUID) -> AuditHead:
    """The subject's head row, created if missing, locked until the transaction ends.

    On PostgreSQL one statement: an upsert takes the row lock whether it inserts or updates (a
    concurrent first append waits for the other's commit, then locks the row it made)."""
    if connection.vendor == "postgresql":
        return locked_head_from(
            subject_type, subject_id, rows.fetch_one(lock_head_sql(), [subject_type, subject_id])
        )
    heads = AuditHead.objects.select_for_update().filter(subject_type=subject_type, subject_id=subject_id)
    head = heads.first()
    if head is None:
        # ON CONFLICT DO NOTHING: a concurrent first append waits for the other's commit, then locks.
        AuditHead.objects.bulk_create(
            [AuditHead(subject_type=subject_type, subject_id=subject_id)], ignore_conflicts=True
        )
        head = heads.get()
    return head


def entry_hash_of(entry: AuditEntry) -> str:
    """The HMAC-SHA256 (hex) an entry should carry, computed from its fields."""
    return _hash_fields({name: getattr(entry, name) for name in HASHED_FIELDS})


def _hash_fields(fields: Mapping[str, Any]) -> str:
    payload = {name: _canonical_value(fields[name]) for name in HASHED_FIELDS}
    message = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    key = settings.HITL_AUDIT_KEY.encode()
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


def _canonical_value(value: Any) -> Any:
    """A JSON value that is the same before the entry is stored and after it is read back."""
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        # jsonb stores numbers as numeric and prints 1e20 back as 100000000000000000000 and 1.0 as 1.0;
        # an integral float therefore hashes as the integer it reads back as.
        exact = Decimal(repr(value))
        return int(exact) if exact == exact.to_integral_value() else value
    if isinstance(value, dict):
        return {key: _canonical_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_canonical_value(item) for item in value]
    return value


def _as_stored_json(detail: dict[str, Any]) -> dict[str, Any]:
    """The detail as it will read back from the database (UUIDs, times and decimals become strings)."""
    return json.loads(json.dumps(detail, cls=DjangoJSONEncoder, allow_nan=False))


def _as_uuid(value: uuid.UUID | str) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def _as_uuid_or_none(value: uuid.UUID | str | None) -> uuid.UUID | None:
    return None if value is None else _as_uuid(value)


@dataclass(frozen=True)
class ChainProblem:
    subject_type: str
    subject_id: uuid.UUID
    sequence: int | None
    problem: str

    def __str__(self) -> str:
        where = f"#{self.sequence}" if self.sequence is not None else "head"
        return f"{self.subject_type} {self.subject_id} {where}: {self.problem}"


@dataclass
class ChainReport:
    entries_checked: int = 0
    subjects_checked: int = 0
    problems: list[ChainProblem] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems


def verify_ledger(*, subject_type: str | None = None, subject_id: uuid.UUID | None = None) -> ChainReport:
    """Check the chosen chains and count what was checked.

    Detects an edited entry (its HMAC does not match), a deleted entry (a sequence gap, or a head
    that points past the newest entry), reordered or rewired entries (``prev_hash`` is not the
    previous entry's ``entry_hash``), entries without a head and a head without entries. Streams
    entries in (subject, sequence) order, so memory does not grow with the ledger; outside a
    transaction it reads one REPEATABLE READ snapshot, so concurrent appends cause no false alarms.
    """
    report = ChainReport()
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            # One snapshot for every query below; only a transaction's first statement may set this.
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        for type_ in _subject_types(subject_type, subject_id):
            _verify_subject_type(report, type_, None if subject_id is None else _as_uuid(subject_id))
    return report


def _subject_types(subject_type: str | None, subject_id: uuid.UUID | None) -> list[str]:
    if subject_type is not None:
        return [subject_type]
    types = set(SubjectType.values)
    if subject_id is None:
        # Entries or heads forged with an unknown subject type are checked (and reported) too.
        types.update(AuditEntry.objects.order_by().values_list("subject_type", flat=True).distinct())
        types.update(AuditHead.objects.order_by().values_list("subject_type", flat=True).distinct())
    return sorted(types)


def _verify_subject_type(report: ChainReport, subject_type: str, subject_id: uuid.UUID | None) -> None:
    entries = AuditEntry.objects.filter(subject_type=subject_type)
    heads = AuditHead.objects.filter(subject_type=subject_type)
    if subject_id is not None:
        entries = entries.filter(subject_id=subject_id)
        heads = heads.filter(subject_id=subject_id)
    entry_rows = (
        entries.order_by("subject_id", "sequence")
        .values(*_VERIFIED_FIELDS)
        .iterator(chunk_size=VERIFY_CHUNK_SIZE)
    )
    head_rows: Iterator[Mapping[str, Any]] = (
        heads.order_by("subject_id")
        .values("subject_id", "last_sequence", "last_hash")
        .iterator(chunk_size=VERIFY_CHUNK_SIZE)
    )
    head = next(head_rows, None)
    # A merge join of two streams sorted by subject_id (uuid order is the same in PostgreSQL and Python).
    for sid, chain in itertools.groupby(entry_rows, key=lambda row: row["subject_id"]):
        while head is not None and head["subject_id"] < sid:
            _report_empty_head(report, subject_type, head)
            head = next(head_rows, None)
        matching_head = None
        if head is not None and head["subject_id"] == sid:
            matching_head, head = head, next(head_rows, None)
        _verify_chain(report, subject_type, sid, chain, matching_head)
    while head is not None:
        _report_empty_head(report, subject_type, head)
        head = next(head_rows, None)


def _report_empty_head(report: ChainReport, subject_type: str, head: Mapping[str, Any]) -> None:
    report.subjects_checked += 1
    report.problems.append(
        ChainProblem(
            subject_type,
            head["subject_id"],
            None,
            f"the head points at entry {head['last_sequence']} but the subject has no entries "
            "(all entries deleted?)",
        )
    )


def _verify_chain(
    report: ChainReport,
    subject_type: str,
    subject_id: uuid.UUID,
    chain: Iterable[Mapping[str, Any]],
    head: Mapping[str, Any] | None,
) -> None:
    report.subjects_checked += 1

    def problem(sequence: int | None, text: str) -> None:
        report.problems.append(ChainProblem(subject_type, subject_id, sequence, text))

    expected_sequence = 1
    expected_prev_hash = GENESIS_HASH
    last: Mapping[str, Any] | None = None
    for row in chain:
        report.entries_checked += 1
        sequence = row["sequence"]
        linked = sequence == expected_sequence
        if sequence > expected_sequence:
            missing = (
                f"entry {expected_sequence} is"
                if sequence == expected_sequence + 1
                else f"entries {expected_sequence}..{sequence - 1} are"
            )
            problem(sequence, f"sequence gap: {missing} missing (deleted?)")
        elif sequence < expected_sequence:
            problem(sequence, f"duplicate sequence {sequence}")
        if _hash_fields(row) != row["entry_hash"]:
            problem(sequence, "entry hash mismatch: the entry was edited (or written without the audit key)")
        if linked and row["prev_hash"] != expected_prev_hash:
            before = "the chain start" if sequence == 1 else f"entry {sequence - 1}'s hash"
            problem(sequence, f"prev_hash does not match {before}: entries reordered or rewired")
        expected_sequence = sequence + 1
        expected_prev_hash = row["entry_hash"]
        last = row
    if last is None:
        return
    if head is None:
        problem(None, f"the chain has entries up to {last['sequence']} but no head")
    elif head["last_sequence"] > last["sequence"]:
        problem(
            None,
            f"the head points at entry {head['last_sequence']} but the newest entry is {last['sequence']}: "
            "the tail was deleted",
        )
    elif head["last_sequence"] != last["sequence"] or head["last_hash"] != last["entry_hash"]:
        problem(
            None,
            f"the head (entry {head['last_sequence']}) does not match the newest entry ({last['sequence']})",
        )
