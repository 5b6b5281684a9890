"""Reads of the audit ledger."""

from __future__ import annotations

import datetime
import uuid

from django.db import connection
from django.db.models import Q, QuerySet

from approvals.models import AuditEntry, SubjectType


def audit_entries(
    *,
    conversation: uuid.UUID | None = None,
    pause: uuid.UUID | None = None,
    actor: str | None = None,
    verb: str | None = None,
    since: datetime.datetime | None = None,
    until: datetime.datetime | None = None,
) -> QuerySet[AuditEntry]:
    """Audit entries matching every given filter, oldest first.

    ``conversation`` matches entries about the conversation (its ``conversation_id``) and entries of
    the subject with that id; ``since`` is inclusive and ``until`` exclusive.
    """
    entries = AuditEntry.objects.all()
    if conversation is not None:
        # Naming every subject type lets PostgreSQL use the (subject_type, subject_id, sequence) index.
        about_subject = Q(subject_type__in=SubjectType.values, subject_id=conversation)
        entries = entries.filter(Q(conversation_id=conversation) | about_subject)
    if pause is not None:
        entries = entries.filter(pause_id=pause)
    if actor:
        entries = entries.filter(actor=actor)
    if verb:
        entries = entries.filter(verb=verb)
    if since is not None:
        entries = entries.filter(created_at__gte=since)
    if until is not None:
        entries = entries.filter(created_at__lt=until)
    return entries.order_by("created_at", "id")


def recorded_verbs() -> list[str]:
    """Every verb in the ledger, in order.

    A loose index scan over the (verb, created_at) index: one index probe per distinct verb, where
    SELECT DISTINCT would read every entry (a fifth of a second per million entries).
    """
    table = connection.ops.quote_name(AuditEntry._meta.db_table)
    if connection.vendor != "postgresql":
        return list(AuditEntry.objects.order_by("verb").values_list("verb", flat=True).distinct())
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH RECURSIVE verbs(verb) AS (
                (SELECT verb FROM {table} ORDER BY verb LIMIT 1)
                UNION ALL
                SELECT (SELECT verb FROM {table} WHERE verb > verbs.verb ORDER BY verb LIMIT 1)
                FROM verbs WHERE verbs.verb IS NOT NULL
            )
            SELECT verb FROM verbs WHERE verb IS NOT NULL
            """  # nosec B608  # identifiers from model metadata, values are parameters
        )
        return [row[0] for row in cursor.fetchall()]
