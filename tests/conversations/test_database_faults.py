"""Injected database faults (fast size): 200 REST operations, 5 % of statements failing before they run
and 5 % of commits failing after they landed; a client that retries; then the invariants.

The harness is harnesses/fault_load.py (the injector harnesses/database_faults.py); the full size is
bench/db_faults.py.
"""

from __future__ import annotations

import pytest

from harnesses.fault_load import check_invariants, run_fault_load, transfer_server

OPS = 200
SEED = 4


@pytest.mark.django_db(transaction=True)
def test_database_faults_before_and_after_commit_leave_one_decision_per_pause_and_a_verified_ledger(
    audit_truncate_allowed_for_flush: None,
) -> None:
    with transfer_server() as (url, received):
        result = run_fault_load(ops=OPS, seed=SEED, tool_server=url)

    failures = check_invariants(result, transfers=received.count("/transfers"))
    assert not failures, "\n".join(failures[:15])
    assert result.faults["before"] >= 10 and result.faults["after"] >= 3, result.faults
    assert result.statuses[503] > 0 and result.counts["start:started"] > 0
