"""S1, the authorization matrix over REST: every documented operation × every role × the subject states
that matter, each cell's expected outcome from the one table (harnesses/authz_table.py, mirroring
docs/rest-api.md). The full size (more states, every undocumented method) is bench/authz_matrix.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harnesses.authz_rest import REST_ENDPOINTS, Endpoint, World, method_cells, rest_cells, run_cell
from harnesses.authz_table import NO_SUBJECT, ROLES, differing, markdown_table
from tests.test_api_surface import _openapi

UNDOCUMENTED_PUBLIC = {"GET /api/schema/", "GET /api/docs/"}  # the schema does not list itself


def test_every_documented_operation_is_a_row_of_the_matrix(db):
    """A new endpoint fails here until the table says who may call it."""
    documented = {f"{method.upper()} {path}" for path, ops in _openapi()["paths"].items() for method in ops}
    rows = {name.split("?")[0] for name in REST_ENDPOINTS} - UNDOCUMENTED_PUBLIC

    assert documented - rows == set(), "operations without a row in harnesses/authz_rest.py"
    assert rows - documented == set(), "rows for operations the schema does not document"


@pytest.mark.usefixtures("continuations_queued")
def test_rest_authorization_matrix_matches_the_docs_in_every_cell(db, capsys):
    cells = rest_cells(World.build())

    wrong = differing(cells)
    with capsys.disabled():
        print(f"\nS1 REST matrix: {len(cells)} cells run, {len(cells) - len(wrong)} matching")
    assert wrong == [], "\n".join(wrong)


def test_private_metrics_are_for_staff_never_for_a_service_account(db, settings):
    """With HITL_METRICS_PUBLIC off, /metrics is staff's: a service account is refused even when someone
    made it staff and put it in the admin group ("other agent")."""
    settings.HITL_METRICS_PUBLIC = False
    world = World.build()
    cells = [
        run_cell(world, "GET /metrics", Endpoint("staff", "/metrics"), role, NO_SUBJECT) for role in ROLES
    ]

    assert differing(cells) == []


@pytest.mark.fullsize  # bench/authz_matrix.py runs it (-m fullsize); ./scripts/test leaves it out
@pytest.mark.usefixtures("continuations_queued")
def test_full_authorization_matrix(transactional_db, capsys, monkeypatch):
    """REST with ownerless subjects, HITL jobs and every undocumented method, then the admin and MCP; the
    markdown table is written to $HITL_AUTHZ_FULL. Committed users: MCP's token gate looks a token up on a
    thread of its own."""
    # the tool dispatch closes stale connections (a server's habit): inside the test's transaction, keep it
    monkeypatch.setattr("mcp_surface.server.close_old_connections", lambda: None)
    from tests.test_authorization_matrix_surfaces import admin_cells, mcp_cells

    world = World.build()
    cells = rest_cells(world, full=True) + method_cells(world) + admin_cells(world) + mcp_cells(world)

    wrong = differing(cells)
    Path(os.environ["HITL_AUTHZ_FULL"]).write_text(markdown_table(cells) + "\n")
    with capsys.disabled():
        print(f"\nS1 full matrix: {len(cells)} cells run, {len(cells) - len(wrong)} matching")
    assert wrong == [], "\n".join(wrong)
