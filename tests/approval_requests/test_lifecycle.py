"""An approval request from filing to outcome over REST: pinned and not, edited, rejected, cancelled."""

from __future__ import annotations

import pytest
import time_machine

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


def test_the_person_it_is_for_reads_and_cancels_but_never_decides(agent, alice, bob):
    filed = file_request(
        agent,
        onBehalfOf="alice",
        action={"name": "refund", "arguments": {"apiKey": "sk-live-abcdefghijklmnop"}},
    )
    read = client_for(alice).get(f"/approval-requests/{filed['id']}")
    assert read.status_code == 200
    assert "sk-live-abcdefghijklmnop" not in read.content.decode()
    assert client_for(bob).get(f"/approval-requests/{filed['id']}").status_code == 403
    decide = client_for(alice).post(
        f"/approval-requests/{filed['id']}/decision", {"verdict": "APPROVED"}, format="json"
    )
    assert decide.status_code == 403
    assert client_for(alice).get("/approval-requests").json()["approvalRequests"][0]["id"] == filed["id"]
    assert client_for(bob).get("/approval-requests").json()["approvalRequests"] == []
    assert client_for(alice).post(f"/approval-requests/{filed['id']}/cancel").json()["status"] == "CANCELLED"


def test_an_approver_it_is_for_may_not_decide_when_self_approval_is_off(agent, approver, admin_user):
    filed = file_request(agent, onBehalfOf="approver", hitlConfig={"allowSelfApproval": False})
    refused = client_for(approver).post(
        f"/approval-requests/{filed['id']}/decision", {"verdict": "APPROVED"}, format="json"
    )
    assert refused.status_code == 403
    assert ApprovalRequest.objects.get(pk=filed["id"]).status == "PENDING"
    decided = client_for(admin_user).post(
        f"/approval-requests/{filed['id']}/decision", {"verdict": "APPROVED"}, format="json"
    )
    assert decided.json()["status"] == "APPROVED"


def test_bad_fields_are_named_and_nothing_is_filed(agent):
    bad = filing(
        request={
            "method": "FETCH",
            "url": "ftp://x",
            "headers": {"Bad Name": "v"},
            "secretHeaders": ["Authorization"],
        },
        hitlConfig={"timeoutPolicy": "ABORT", "allowEdit": "no"},
    )
    answer = client_for(agent).post("/approval-requests", bad, format="json")
    assert answer.status_code == 400
    fields = {error["field"] for error in answer.json()["errors"]}
    assert {"request.method", "request.url", "request.headers.Bad Name", "request.secretHeaders"} <= fields
    assert {"hitlConfig.approvalTimeout", "hitlConfig.allowEdit"} <= fields
    assert ApprovalRequest.objects.count() == 0


def test_edits_are_refused_when_the_request_does_not_allow_them(agent, approver):
    filed = file_request(agent, hitlConfig={"allowEdit": False, "allowRespond": False})
    url = f"/approval-requests/{filed['id']}/decision"
    edit = client_for(approver).post(
        url, {"verdict": "APPROVED", "amendedArguments": {"amount": 1}}, format="json"
    )
    assert edit.status_code == 400
    assert edit.json()["errors"][0]["field"] == "amendedArguments"
    reply = client_for(approver).post(
        url, {"verdict": "REJECTED", "note": "ask again", "guidance": True}, format="json"
    )
    assert reply.status_code == 400
    pinned_edit = client_for(approver).post(
        url, {"verdict": "APPROVED", "amendedRequest": {"body": "x"}}, format="json"
    )
    assert pinned_edit.status_code == 400
    assert ApprovalRequest.objects.get(pk=filed["id"]).status == "PENDING"


def test_a_reply_with_guidance_is_a_rejection_the_agent_reads(agent, approver):
    filed = file_request(agent)
    client_for(approver).post(
        f"/approval-requests/{filed['id']}/decision",
        {"verdict": "REJECTED", "note": "Refund 100 and open a ticket", "guidance": True},
        format="json",
    )
    decision = client_for(agent).get(f"/approval-requests/{filed['id']}").json()["decision"]
    assert decision["verdict"] == "REJECTED"
    assert decision["guidance"] == "Refund 100 and open a ticket"


def test_a_secret_header_cannot_be_edited_and_an_approved_unclaimed_request_can_be_withdrawn(agent, approver):
    filed = file_request(agent, request=PINNED)
    url = f"/approval-requests/{filed['id']}/decision"
    secret_edit = client_for(approver).post(
        url,
        {"verdict": "APPROVED", "amendedRequest": {"headers": {"Authorization": "Bearer mine"}}},
        format="json",
    )
    assert secret_edit.status_code == 400
    assert secret_edit.json()["errors"][0]["field"] == "amendedRequest.headers.Authorization"
    client_for(approver).post(url, {"verdict": "APPROVED"}, format="json")
    assert client_for(agent).post(f"/approval-requests/{filed['id']}/cancel").json()["status"] == "CANCELLED"
    claim = client_for(agent).post(
        f"/approval-requests/{filed['id']}/claim", {"request": PINNED}, format="json"
    )
    assert claim.json()["code"] == "WRONG_STATE"


def test_a_claim_after_the_grant_expired_is_refused(agent, approver, settings):
    settings.HITL_GRANT_TTL = "PT1S"
    filed = file_request(agent)
    client_for(approver).post(
        f"/approval-requests/{filed['id']}/decision", {"verdict": "APPROVED"}, format="json"
    )
    with time_machine.travel(ApprovalRequest.objects.get(pk=filed["id"]).grant_expires_at, tick=False):
        late = client_for(agent).post(f"/approval-requests/{filed['id']}/claim", {}, format="json")
    assert late.status_code == 409
    assert late.json()["code"] == "GRANT_EXPIRED"


def test_a_service_account_finds_its_request_by_its_idempotency_key_and_no_other(agent, other_agent):
    mine = file_request(agent, idempotencyKey="run-7/call-1")
    file_request(agent, idempotencyKey="run-7/call-2")
    file_request(other_agent, idempotencyKey="run-7/call-1")
    found = client_for(agent).get("/approval-requests", {"idempotencyKey": "run-7/call-1"}).json()
    assert [item["id"] for item in found["approvalRequests"]] == [mine["id"]]
    other = client_for(agent).get("/approval-requests", {"idempotencyKey": "run-7/call-9"}).json()
    assert other["approvalRequests"] == []
    too_long = client_for(agent).get("/approval-requests", {"idempotencyKey": "k" * 201})
    assert too_long.status_code == 400
    assert [error["field"] for error in too_long.json()["errors"]] == ["idempotencyKey"]
