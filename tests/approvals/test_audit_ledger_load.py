"""The ledger under load (fast size): 16 racing threads on real PostgreSQL, then five raw-SQL tamperings.

The full size is bench/audit_ledger_load.py; the harness is harnesses/ledger_load.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection

from harnesses.ledger_load import TAMPERINGS, check_ledger, run_load, run_verify_command, tamper_and_detect

THREADS = 16
OPS_PER_THREAD = 6


@pytest.fixture
def audit_truncate_allowed_for_flush(transactional_db: None) -> Iterator[None]:
    """Django flushes (TRUNCATEs) the tables after a transactional test; let it past the audit trigger."""
    yield
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hitl.audit_truncate', 'allow', false)")


@pytest.mark.django_db(transaction=True)
def test_ledger_under_sixteen_racing_threads_stays_gap_free_verified_and_tamper_evident(
    audit_truncate_allowed_for_flush: None,
) -> None:
    result = run_load(threads=THREADS, ops=OPS_PER_THREAD)

    failures = check_ledger(result)
    assert not failures, "\n".join(failures[:10])
    assert result.counts["decided"] + result.counts["cancelled"] > 0 and result.counts["note"] > 0
    assert result.entries == THREADS * OPS_PER_THREAD - result.counts["lost"]

    outcomes = tamper_and_detect()
    missed = [(name, first_problem) for name, detected, first_problem in outcomes if not detected]
    assert missed == [], f"tampering detected {len(outcomes) - len(missed)}/{len(TAMPERINGS)}"
    code, output = run_verify_command()
    assert code == 1
    assert f"{len(TAMPERINGS)} problem(s) found" in output or output.count("PROBLEM") >= len(TAMPERINGS)
