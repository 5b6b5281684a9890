"""R6: the API contract, schemathesis with every check over /api/schema/ with every role's token."""

from __future__ import annotations

import os

import pytest

from tests.api_contract import live_wsgi_server, role_tokens, run_contract


@pytest.mark.django_db(transaction=True)
def test_api_contract_every_operation_every_role():
    tokens = role_tokens()
    with live_wsgi_server() as base_url:
        report = run_contract(
            base_url=base_url,
            tokens=tokens,
            max_examples=int(os.environ.get("CONTRACT_EXAMPLES", "5")),
            phases=tuple(os.environ.get("CONTRACT_PHASES", "examples,fuzzing").split(",")),
        )
    with open(os.environ.get("CONTRACT_OUT", "/tmp/contract_out.txt"), "w") as out:
        import json

        json.dump(
            {
                "failures": [f.__dict__ for f in report.failures],
                "statuses": [[k[0], k[1], v] for k, v in report.statuses.items()],
            },
            open(os.environ.get("CONTRACT_OUT", "/tmp/contract_out.txt") + ".json", "w"),
        )
        out.write(
            report.summary(limit=400)
            + "\n"
            + repr(report.slowest.most_common(30))
            + "\n"
            + repr(report.requests_by_role)
        )
    assert not report.failures and not report.errors, report.summary()
