"""Operator relays: admins report canary outcomes and gate status; they show in /metrics."""

from __future__ import annotations

import pytest

from tests.hitl_project.scrape import moved, scrape, value

pytestmark = pytest.mark.django_db


def test_a_canary_outcome_counts_and_its_duration_is_observed(admin_client):
    before = scrape()
    response = admin_client.post(
        "/administration/operator/canary-result", {"outcome": "pass", "durationSeconds": 1.5}, format="json"
    )
    assert response.status_code == 204
    changes = moved(before, scrape(), "hitl_operator_canary")
    assert changes[("hitl_operator_canary_total", frozenset({("outcome", "pass")}))] == 1.0
    assert changes[("hitl_operator_canary_duration_seconds_count", frozenset())] == 1.0


def test_a_bad_duration_still_counts_the_outcome(admin_client):
    before = scrape()
    response = admin_client.post(
        "/administration/operator/canary-result",
        {"outcome": "fail", "durationSeconds": "soon"},
        format="json",
    )
    assert response.status_code == 204
    changes = moved(before, scrape(), "hitl_operator_canary")
    assert changes == {("hitl_operator_canary_total", frozenset({("outcome", "fail")})): 1.0}


def test_a_bad_outcome_is_400_naming_the_field_and_counts_nothing(admin_client):
    before = scrape()
    response = admin_client.post(
        "/administration/operator/canary-result", {"outcome": "maybe"}, format="json"
    )
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "outcome"
    assert moved(before, scrape(), "hitl_operator_canary") == {}


def test_gate_status_sets_the_gauge(admin_client):
    assert (
        admin_client.post(
            "/administration/operator/gate-status", {"verified": True}, format="json"
        ).status_code
        == 204
    )
    assert value(scrape(), "hitl_operator_gate_verified") == 1.0
    admin_client.post("/administration/operator/gate-status", {"verified": False}, format="json")
    assert value(scrape(), "hitl_operator_gate_verified") == 0.0


@pytest.mark.parametrize("outcome", [" PASS ", "Unknown"])
def test_a_canary_outcome_is_read_trimmed_and_case_insensitively(admin_client, outcome):
    before = scrape()
    response = admin_client.post(
        "/administration/operator/canary-result", {"outcome": outcome}, format="json"
    )
    assert response.status_code == 204, response.content
    label = outcome.strip().lower()
    assert moved(before, scrape(), "hitl_operator_canary") == {
        ("hitl_operator_canary_total", frozenset({("outcome", label)})): 1.0
    }


@pytest.mark.parametrize("body", [{}, {"verified": "true"}, {"verified": 1}, {"verified": None}, []])
def test_gate_status_takes_only_a_json_boolean(admin_client, body):
    response = admin_client.post("/administration/operator/gate-status", body, format="json")
    assert response.status_code == 400, response.content
    expected = "body" if isinstance(body, list) else "verified"
    assert [e["field"] for e in response.json()["errors"]] == [expected]


@pytest.mark.parametrize("path", ["canary-result", "gate-status"])
def test_only_admins_may_report(alice_client, approver_client, anon_client, path):
    body = {"outcome": "pass", "verified": True}
    assert anon_client.post(f"/administration/operator/{path}", body, format="json").status_code == 401
    assert alice_client.post(f"/administration/operator/{path}", body, format="json").status_code == 403
    assert approver_client.post(f"/administration/operator/{path}", body, format="json").status_code == 403
