"""R6, the API contract's coverage phase at fast size: every operation's boundary values and the bodies of
the wrong JSON type (a list where an object is due, ``null``, …), with the admin's token, the role whose
requests reach every body but the approval requests' filings, claims and outcomes, and on those with a
service account's (the other roles are refused before a body is read, and run in the examples and
fuzzing phases of tests/test_api_contract.py). It is what found the 500 of ``enable`` with a list body,
which the examples and fuzzing phases at 2 examples an operation do not reach (docs/reliability.md, R6).
"""

from __future__ import annotations

import pytest

from harnesses.api_contract import live_wsgi_server, role_tokens, run_contract

pytestmark = pytest.mark.long


def test_the_coverage_phase_as_admin_finds_no_server_error_and_no_contract_violation(transactional_db):
    tokens = role_tokens()
    with live_wsgi_server() as base_url:
        report = run_contract(
            base_url=base_url, tokens={"admin": tokens["admin"]}, max_examples=2, phases=("coverage",)
        )

    print(report.summary())

    if not report.clean:
        pytest.fail(report.summary(), pytrace=False)
    assert len(report.operations) >= 59, sorted(report.operations)


def test_the_coverage_phase_as_a_service_account_on_the_approval_requests(transactional_db):
    """The bodies only a service account's requests reach: the filing, the claim, the outcome."""
    tokens = role_tokens()
    with live_wsgi_server() as base_url:
        report = run_contract(
            base_url=base_url,
            tokens={"agent": tokens["agent"]},
            max_examples=2,
            phases=("coverage",),
            path_regex="^/approval-requests",
        )

    print(report.summary())

    if not report.clean:
        pytest.fail(report.summary(), pytrace=False)
    assert {"POST /approval-requests", "POST /approval-requests/{request_id}/claim"} <= report.operations
