"""An approval request from filing to outcome over REST: pinned and not, edited, rejected, cancelled."""

from __future__ import annotations

import pytest

from approval_requests.models import ApprovalRequest
from approvals.models import AuditEntry
from harnesses.users import client_for
from tests.approval_requests.conftest import PINNED, file_request, filing

pytestmark = pytest.mark.django_db


def test_filing_answers_201_with_the_contract_fields(agent):
    body = file_request(agent, request=PINNED)
    assert body["status"] == "PENDING"
    assert body["requestPinned"] is True
    assert list(body)[:5] == ["id", "status", "deadline", "requestPinned", "requestPreview"]
    preview = body["requestPreview"]
    assert preview["headers"]["Authorization"] != PINNED["headers"]["Authorization"]
    assert "sk-live" not in str(body)
    assert preview["body"] == PINNED["body"]
    assert preview["url"] == PINNED["url"]


def test_the_same_key_and_body_answers_the_same_request(agent):
    first = file_request(agent)
    again = client_for(agent).post("/approval-requests", filing(), format="json")
    assert again.status_code == 200
    assert again.json()["id"] == first["id"]
    assert ApprovalRequest.objects.count() == 1


def test_the_same_key_with_another_body_is_409(agent):
    file_request(agent)
    other = client_for(agent).post("/approval-requests", filing(reason="something else"), format="json")
    assert other.status_code == 409
    assert other.json()["code"] == "IDEMPOTENCY_CONFLICT"


def test_approve_claim_and_report_a_pinned_request(agent, approver):
    filed = file_request(agent, request=PINNED)
    decided = client_for(approver).post(
        f"/approval-requests/{filed['id']}/decision", {"verdict": "APPROVED"}, format="json"
    )
    assert decided.status_code == 200, decided.content
    assert decided.json()["status"] == "APPROVED"
    read = client_for(agent).get(f"/approval-requests/{filed['id']}").json()
    assert read["decision"]["decidedBy"] == "approver"
    claimed = client_for(agent).post(
        f"/approval-requests/{filed['id']}/claim", {"request": PINNED}, format="json"
    )
    assert claimed.status_code == 200, claimed.content
    grant = claimed.json()["grant"]
    assert grant["token"] and grant["claimId"]
    again = client_for(agent).post(
        f"/approval-requests/{filed['id']}/claim", {"request": PINNED}, format="json"
    )
    assert again.status_code == 409
    assert again.json()["code"] == "OUTCOME_UNKNOWN"
    reported = client_for(agent).post(
        f"/approval-requests/{filed['id']}/outcome", {"status": "succeeded", "httpStatus": 201}, format="json"
    )
    assert reported.status_code == 200, reported.content
    third = client_for(agent).post(
        f"/approval-requests/{filed['id']}/claim", {"request": PINNED}, format="json"
    )
    assert third.json()["code"] == "ALREADY_CLAIMED"
    assert third.json()["outcome"]["httpStatus"] == 201
    verbs = list(
        AuditEntry.objects.filter(subject_id=filed["id"]).order_by("sequence").values_list("verb", flat=True)
    )
    assert verbs == ["hitl.pause", "hitl.approval", "hitl.request.claimed", "hitl.request.outcome"]


def test_a_changed_byte_in_the_pinned_request_is_request_changed(agent, approver):
    filed = file_request(agent, request=PINNED)
    client_for(approver).post(
        f"/approval-requests/{filed['id']}/decision", {"verdict": "APPROVED"}, format="json"
    )
    changed = {**PINNED, "body": PINNED["body"].replace("250", "2500")}
    refused = client_for(agent).post(
        f"/approval-requests/{filed['id']}/claim", {"request": changed}, format="json"
    )
    assert refused.status_code == 409
    assert refused.json()["code"] == "REQUEST_CHANGED"
    assert AuditEntry.objects.filter(subject_id=filed["id"], verb="hitl.request.request_changed").count() == 1
    secret = {**PINNED, "headers": {**PINNED["headers"], "Authorization": "Bearer other"}}
    assert (
        client_for(agent)
        .post(f"/approval-requests/{filed['id']}/claim", {"request": secret}, format="json")
        .json()["code"]
        == "REQUEST_CHANGED"
    )
    ok = client_for(agent).post(f"/approval-requests/{filed['id']}/claim", {"request": PINNED}, format="json")
    assert ok.status_code == 200


def test_an_edit_is_what_the_grant_covers(agent, approver):
    filed = file_request(agent, request=PINNED)
    amended_body = '{"orderId":"A-1","amount":100}'
    decided = client_for(approver).post(
        f"/approval-requests/{filed['id']}/decision",
        {
            "verdict": "APPROVED",
            "amendedArguments": {"orderId": "A-1", "amount": 100},
            "amendedRequest": {"body": amended_body},
        },
        format="json",
    )
    assert decided.status_code == 200, decided.content
    body = decided.json()
    assert body["decision"]["amendedArguments"] == {"orderId": "A-1", "amount": 100}
    assert body["grant"]["arguments"] == {"orderId": "A-1", "amount": 100}
    original = client_for(agent).post(
        f"/approval-requests/{filed['id']}/claim", {"request": PINNED}, format="json"
    )
    assert original.json()["code"] == "REQUEST_CHANGED"
    edited = {**PINNED, "body": amended_body}
    assert (
        client_for(agent)
        .post(f"/approval-requests/{filed['id']}/claim", {"request": edited}, format="json")
        .status_code
        == 200
    )


def test_rejected_and_cancelled(agent, approver):
    rejected = file_request(agent, idempotencyKey="k-1")
    answer = client_for(approver).post(
        f"/approval-requests/{rejected['id']}/decision", {"verdict": "REJECTED", "note": "no"}, format="json"
    )
    assert answer.json()["status"] == "REJECTED"
    assert (
        client_for(agent).post(f"/approval-requests/{rejected['id']}/claim", {}, format="json").json()["code"]
        == "WRONG_STATE"
    )
    cancelled = file_request(agent, idempotencyKey="k-2")
    assert (
        client_for(agent).post(f"/approval-requests/{cancelled['id']}/cancel").json()["status"] == "CANCELLED"
    )


def test_an_agent_never_decides_and_never_reads_another_accounts(agent, other_agent):
    filed = file_request(agent)
    assert (
        client_for(agent)
        .post(f"/approval-requests/{filed['id']}/decision", {"verdict": "APPROVED"}, format="json")
        .status_code
        == 403
    )
    assert client_for(other_agent).get(f"/approval-requests/{filed['id']}").status_code == 403
    assert client_for(agent).get("/agents/pending-approvals").status_code == 403
