"""A client written for EDDI's human-in-the-loop API works here: its paths, bodies, field names and
authentication, each beside ours (docs/eddi-compatibility.md). Real PostgreSQL, the REST API through
DRF's test client with the header EDDI's clients send, the MCP gate over httpx's ASGI transport."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from approvals import metrics
from harnesses.factories import paused_conversation
from harnesses.users import client_for, make_user
from mcp_surface.identity import TokenRequired

pytestmark = pytest.mark.django_db


def bearer(user) -> APIClient:
    """A client that authenticates as EDDI's clients do: ``Authorization: Bearer <token>``."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {Token.objects.get_or_create(user=user)[0].key}")
    return client


def test_a_bearer_token_is_accepted_beside_token(alice, approver):
    conversation_id = paused_conversation(bearer(alice))
    assert bearer(alice).get(f"/agents/{conversation_id}").status_code == 200
    assert client_for(alice).get(f"/agents/{conversation_id}").status_code == 200  # ours, unchanged
    refused = APIClient()
    refused.credentials(HTTP_AUTHORIZATION="Bearer not-a-token")
    assert refused.get(f"/agents/{conversation_id}").status_code == 401
    lower = APIClient()
    lower.credentials(HTTP_AUTHORIZATION=f"bearer {Token.objects.get(user=alice).key}")
    assert lower.get(f"/agents/{conversation_id}").status_code == 200
    assert (
        bearer(approver)
        .post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
        .status_code
        == 200
    )


def test_mcp_takes_a_bearer_token_too(transactional_db):
    user = make_user("mcp-user")
    key = Token.objects.get_or_create(user=user)[0].key

    async def status(authorization: str) -> tuple[int, bool]:
        reached = []

        async def behind(scope, receive, send) -> None:
            reached.append(scope)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        transport = httpx.ASGITransport(app=TokenRequired(behind))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            response = await client.post("/mcp", json={}, headers={"Authorization": authorization})
        return response.status_code, bool(reached)

    assert asyncio.run(status(f"Bearer {key}")) == (200, True)
    assert asyncio.run(status(f"Token {key}")) == (200, True)
    assert asyncio.run(status("Bearer wrong"))[0] == 401


def test_the_snapshot_carries_conversation_state_beside_state(alice):
    conversation_id = paused_conversation(client_for(alice))
    snapshot = client_for(alice).get(f"/agents/{conversation_id}").json()
    assert snapshot["state"] == snapshot["conversationState"] == "AWAITING_HUMAN"


def test_inbox_rows_carry_user_id_beside_owner_id(alice, approver):
    paused_conversation(client_for(alice))
    (row,) = client_for(approver).get("/agents/pending-approvals").json()
    assert row["ownerId"] == row["userId"] == "alice"


def test_the_operator_canary_takes_duration_ms_as_the_manager_sends_it(admin_user):
    def observed() -> float:
        samples = metrics.meters().canary_duration.collect()[0].samples
        return next(sample.value for sample in samples if sample.name.endswith("_sum"))

    sum_before = observed()
    client = client_for(admin_user)
    answered = client.post(
        "/administration/operator/canary-result", {"outcome": "pass", "durationMs": 1500}, format="json"
    )
    assert answered.status_code == 204, answered.content
    assert observed() == pytest.approx(sum_before + 1.5)  # 1500 ms observed as 1.5 s
    both = client.post(
        "/administration/operator/canary-result",
        {"outcome": "pass", "durationMs": 9000, "durationSeconds": 2},
        format="json",
    )
    assert both.status_code == 204 and observed() == pytest.approx(sum_before + 3.5)  # ours wins
    unknown = client.post(
        "/administration/operator/canary-result", {"outcome": "pass", "durationMinutes": 1}, format="json"
    )
    assert unknown.status_code == 400  # anything else is still refused


def _samples(text: str, name: str) -> dict[str, float]:
    """The samples of ``name`` in Prometheus text: labels -> value."""
    found = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            labels, _, value = line.rpartition(" ")
            found[labels[len(name) :]] = float(value)
    return found


def test_the_metrics_are_served_under_eddis_names_at_its_path(alice, anon_client):
    paused_conversation(client_for(alice))
    ours = anon_client.get("/metrics").content.decode()
    eddis = anon_client.get("/q/metrics")
    assert eddis.status_code == 200 and eddis["Content-Type"].startswith("text/plain")
    text = eddis.content.decode()
    pauses = _samples(text, "eddi_hitl_pause_count_total")
    assert pauses and pauses == _samples(ours, "hitl_pauses_total")  # the same samples, renamed
    assert pauses['{surface="regular"}'] >= 1
    assert _samples(text, "eddi_operator_gate_verified") == _samples(ours, "hitl_operator_gate_verified")
    assert "hitl_pauses_total" not in text and "http_requests_total" not in text  # ours stay at /metrics


def test_mcp_approve_group_phase_takes_task_approvals_as_a_json_string(alice, approver, monkeypatch):
    import json

    from groups.models import GroupConversation
    from mcp_surface import group_tools
    from mcp_surface.server import _call
    from tests.groups.test_admin_group_pages import task_discussion

    monkeypatch.setattr("mcp_surface.server.close_old_connections", lambda: None)
    body = task_discussion(alice, on_rejection="FAIL")
    ids = {"group_id": body["groupId"], "conversation_id": body["discussionId"]}

    def approve(**arguments):
        result = _call(group_tools.approve_group_phase, approver, {**ids, "verdict": "APPROVED", **arguments})
        return result.is_error, json.loads(result.content[0].text)

    is_error, refused = approve(task_approvals_json="[1, 2]")
    assert is_error and refused["errorCode"] == "BAD_REQUEST"
    assert refused["details"]["errors"][0]["field"] == "taskApprovalsJson"
    is_error, refused = approve(task_approvals_json="{}", task_approvals={})
    assert is_error and "not both" in refused["details"]["errors"][0]["message"]

    is_error, resumed = approve(task_approvals_json=json.dumps({"a": "APPROVED", "b": "REJECTED"}))
    assert not is_error, resumed
    tasks = {
        task["id"]: task["status"] for task in GroupConversation.objects.get(pk=body["discussionId"]).tasks
    }
    assert tasks == {"a": "COMPLETED", "b": "FAILED"}


def test_the_group_approval_status_carries_eddis_names_beside_ours(alice, approver):
    from tests.groups.test_admin_group_pages import task_discussion

    body = task_discussion(alice)
    status = (
        client_for(approver)
        .get(f"/groups/{body['groupId']}/conversations/{body['discussionId']}/approval-status")
        .json()
    )
    assert status["groupConversationId"] == status["discussionId"] == body["discussionId"]
    assert status["pausedPhaseName"] == status["phaseName"] == "Build"
    assert status["pauseReason"] == status["reason"] == "Requires human approval (TASK) — phase: Build"
    assert status["awaitingApprovalTaskIds"] == status["awaitingTaskIds"] == ["a", "b"]
