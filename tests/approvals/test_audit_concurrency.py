"""Concurrent appends to one subject serialize on its head row: the chain stays gap-free and intact."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from django.db import connection, connections, transaction

from approvals.audit import append_audit_entry, verify_ledger
from approvals.models import AuditEntry, AuditHead

THREADS = 16
APPENDS_PER_THREAD = 20


@pytest.fixture
def audit_truncate_allowed_for_flush(transactional_db: None) -> Iterator[None]:
    """Django flushes (TRUNCATEs) the tables after a transactional test; let it past the audit trigger.

    This connection is closed right after the flush, so the switch does not outlive the test.
    """
    yield
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hitl.audit_truncate', 'allow', false)")


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_to_one_subject_form_one_gap_free_chain(
    audit_truncate_allowed_for_flush: None,
) -> None:
    subject = uuid.uuid4()
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def appender(worker: int) -> None:
        try:
            barrier.wait(timeout=30)
            for index in range(APPENDS_PER_THREAD):
                with transaction.atomic():
                    append_audit_entry(
                        subject_type="conversation",
                        subject_id=subject,
                        verb="hitl.approval",
                        actor=f"worker-{worker}",
                        detail={"index": index},
                    )
        except BaseException as error:  # reported to the main thread, which fails the test
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=appender, args=(worker,)) for worker in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    total = THREADS * APPENDS_PER_THREAD
    sequences = list(
        AuditEntry.objects.filter(subject_id=subject).order_by("sequence").values_list("sequence", flat=True)
    )
    assert sequences == list(range(1, total + 1))
    assert AuditHead.objects.get(subject_id=subject).last_sequence == total
    for worker in range(THREADS):
        assert (
            AuditEntry.objects.filter(subject_id=subject, actor=f"worker-{worker}").count()
            == APPENDS_PER_THREAD
        )
    assert verify_ledger().problems == []
