"""R6, the API contract: every operation of /api/schema/ answers as the schema says, for every role.

schemathesis (every check: no server error, documented status codes, content types, response schemas
and headers, valid data accepted and invalid data refused, ...) against the service on a live server,
with the token of each role of docs/rest-api.md and none; the harness is harnesses/api_contract.py, the full
size bench/api_contract.py (docs/reliability.md, R6). The fast run serves WSGI; the full size serves the
ASGI application production runs (uvicorn, the /mcp dispatch in front of Django), several times slower
(HITL_CONTRACT_SERVER=wsgi: the WSGI server instead).
"""

from __future__ import annotations

import os

import pytest

from harnesses.api_contract import (
    PHASES_FAST,
    PHASES_FULL,
    live_asgi_server,
    live_wsgi_server,
    role_tokens,
    run_contract,
)

pytestmark = pytest.mark.long

FAST_EXAMPLES = 2


def test_every_operation_answers_as_its_schema_says_for_every_role(transactional_db):
    tokens = role_tokens()
    with live_wsgi_server() as base_url:
        report = run_contract(
            base_url=base_url, tokens=tokens, max_examples=FAST_EXAMPLES, phases=PHASES_FAST
        )

    print(report.summary())

    if not report.clean:
        pytest.fail(report.summary(), pytrace=False)
    assert len(report.operations) >= 59, sorted(report.operations)


@pytest.mark.fullsize
def test_full_api_contract(transactional_db):
    examples = int(os.environ.get("HITL_CONTRACT_EXAMPLES", "25"))
    seed = int(os.environ.get("HITL_CONTRACT_SEED", "16"))
    server = live_wsgi_server if os.environ.get("HITL_CONTRACT_SERVER") == "wsgi" else live_asgi_server
    tokens = role_tokens()
    with server() as base_url:
        report = run_contract(
            base_url=base_url, tokens=tokens, max_examples=examples, phases=PHASES_FULL, seed=seed
        )
    print()
    print(report.summary(limit=200))

    if not report.clean:
        pytest.fail(report.summary(), pytrace=False)


def test_a_url_no_route_matches_is_a_problem_details_404(client, admin_client):
    response = client.get("/schedulestore/schedules/not-a-number")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "NOT_FOUND"
    assert client.get("/admin/no-such-page/").status_code in (302, 404)  # the admin keeps its own pages


def test_every_operation_that_needs_a_token_declares_401_as_problem_details(anon_client):
    schema = anon_client.get("/api/schema/", {"format": "json"}).json()
    problem = {"$ref": "#/components/schemas/Problem"}
    missing = [
        f"{method.upper()} {path}"
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if operation.get("security") and {} not in operation["security"]
        if operation["responses"]
        .get("401", {})
        .get("content", {})
        .get("application/problem+json", {})
        .get("schema")
        != problem
    ]

    assert not missing, missing
