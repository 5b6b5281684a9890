"""Approval requests over MCP, driven by the official ``mcp`` client against a live uvicorn: listed, read,
decided (an edit, guidance), cancelled, each refused where REST refuses it, and a service account's token
refused by the surface itself. The requests are filed over REST by a service account, as an agent would;
no answer of the module may carry the value of a header the agent marked secret."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import MCPError

from approval_requests.models import ApprovalRequest
from approvals.models import AuditEntry
from harnesses.live_stack import LiveStack, api_user, running_stack
from tests.e2e.test_live_mcp import CALL_DEADLINE, _calls, mcp_calls

pytestmark = pytest.mark.django_db(transaction=True)

SECRET_HEADER = "Bearer sk-live-" + "9f8e7d6c5b4a" * 2
PINNED = {
    "method": "POST",
    "url": "https://payments.example/refunds",
    "headers": {"Content-Type": "application/json", "Authorization": SECRET_HEADER},
    "body": '{"orderId":"A-1","amount":250}',
    "secretHeaders": ["Authorization"],
}
TEXTS: list[str] = []  # every answer of the module, for the leak check


@pytest.fixture(scope="module")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveStack]:
    yield from running_stack(django_db_blocker, tmp_path_factory.mktemp("mcp-requests"), qclusters=False)


@pytest.fixture
def tokens(live_stack: LiveStack) -> dict[str, str]:
    return {
        "agent": api_user("refund-bot", "agent"),
        "alice": api_user("alice"),
        "bob": api_user("bob"),
        "approver": api_user("approver", "approver"),
        "admin": api_user("admin", "admin"),
    }


def call(stack: LiveStack, token: str, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    ((is_error, body),) = mcp_calls(stack, token, (tool, arguments))
    TEXTS.append(json.dumps(body))
    return is_error, body


def ok(stack: LiveStack, token: str, tool: str, **arguments: Any) -> dict[str, Any]:
    is_error, body = call(stack, token, tool, **arguments)
    assert not is_error, body
    return body


def refused(stack: LiveStack, token: str, tool: str, **arguments: Any) -> dict[str, Any]:
    is_error, body = call(stack, token, tool, **arguments)
    assert is_error, body
    return body


def filed(stack: LiveStack, token: str, key: str, **overrides: Any) -> dict[str, Any]:
    body = {
        "idempotencyKey": key,
        "agent": "refund-bot",
        "action": {"name": "refund", "arguments": {"orderId": "A-1", "amount": 250}},
        "reason": "Refund over 100 EUR",
        "onBehalfOf": "alice",
        "request": PINNED,
        **overrides,
    }
    with stack.client(token) as rest:
        response = rest.post("/approval-requests", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def test_a_reviewer_lists_reads_and_approves_an_edit_the_agent_then_claims(live_stack, tokens):
    request_id = filed(live_stack, tokens["agent"], "run-1/call-1")["id"]

    pending = ok(live_stack, tokens["approver"], "list_approval_requests", status="pending")
    assert [row["id"] for row in pending["approvalRequests"]] == [request_id]
    assert ok(live_stack, tokens["approver"], "list_approval_requests", status="APPROVED") == {
        "approvalRequests": []
    }
    read = ok(live_stack, tokens["approver"], "get_approval_request", requestId=request_id)
    assert read["status"] == "PENDING" and read["action"]["arguments"] == {"orderId": "A-1", "amount": 250}
    assert read["requestPreview"]["url"] == PINNED["url"]
    assert read["requestPreview"]["secretHeaders"] == ["Authorization"]

    edited_body = '{"orderId":"A-1","amount":200}'
    decided = ok(
        live_stack,
        tokens["approver"],
        "decide_approval_request",
        requestId=request_id,
        verdict="approved",
        note="200 at most",
        amendedArguments={"orderId": "A-1", "amount": 200},
        amendedRequest={"body": edited_body},
    )

    assert decided["status"] == "APPROVED"
    decision = decided["decision"]
    assert (decision["verdict"], decision["decidedBy"], decision["note"]) == (
        "APPROVED",
        "mcp:approver",
        "200 at most",
    )
    assert decision["amendedArguments"] == {"orderId": "A-1", "amount": 200}
    assert decided["grant"]["arguments"] == {"orderId": "A-1", "amount": 200}
    assert decided["grant"]["request"]["body"] == edited_body
    entry = AuditEntry.objects.get(verb="hitl.approval", subject_id=request_id)
    assert entry.actor == "mcp:approver" and entry.automated is False
    with live_stack.client(tokens["agent"]) as rest:
        as_filed = rest.post(f"/approval-requests/{request_id}/claim", json={"request": PINNED})
        as_edited = rest.post(
            f"/approval-requests/{request_id}/claim", json={"request": {**PINNED, "body": edited_body}}
        )
    assert as_filed.status_code == 409 and as_filed.json()["code"] == "REQUEST_CHANGED"
    assert as_edited.status_code == 200, as_edited.text  # what the reviewer approved is what is granted

    again = refused(
        live_stack, tokens["admin"], "decide_approval_request", requestId=request_id, verdict="REJECTED"
    )
    assert again["errorCode"] == "WRONG_STATE" and again["details"]["currentState"] == "APPROVED"
    assert [text for text in TEXTS if SECRET_HEADER in text] == []


def test_the_person_reads_and_cancels_but_never_decides_and_others_see_nothing(live_stack, tokens):
    first = filed(live_stack, tokens["agent"], "run-2/call-1")["id"]
    second = filed(live_stack, tokens["agent"], "run-2/call-2", onBehalfOf="bob")["id"]

    mine = ok(live_stack, tokens["alice"], "list_approval_requests")["approvalRequests"]
    assert [row["id"] for row in mine] == [first]
    assert mine[0]["onBehalfOf"] == "alice"
    every = ok(live_stack, tokens["approver"], "list_approval_requests", limit=1)["approvalRequests"]
    assert [row["id"] for row in every] == [second]  # newest first
    plain = refused(
        live_stack, tokens["alice"], "decide_approval_request", requestId=first, verdict="APPROVED"
    )
    assert plain["errorCode"] == "FORBIDDEN" and "only approvers and admins" in plain["error"]
    for request_id in (second, str(uuid.uuid4()), "not-a-uuid"):  # no existence oracle
        body = refused(live_stack, tokens["alice"], "get_approval_request", requestId=request_id)
        assert body["errorCode"] == "FORBIDDEN", request_id
    assert (
        refused(live_stack, tokens["admin"], "get_approval_request", requestId=str(uuid.uuid4()))["errorCode"]
        == "NOT_FOUND"
    )
    assert ApprovalRequest.objects.get(pk=first).status == "PENDING"

    cancelled = ok(live_stack, tokens["alice"], "cancel_approval_request", requestId=first)
    assert cancelled["status"] == "CANCELLED"
    assert AuditEntry.objects.filter(subject_id=first, actor="mcp:alice").exists()
    twice = refused(live_stack, tokens["alice"], "cancel_approval_request", requestId=first)
    assert twice["errorCode"] == "WRONG_STATE" and twice["details"]["currentState"] == "CANCELLED"
    assert (
        refused(live_stack, tokens["bob"], "cancel_approval_request", requestId=first)["errorCode"]
        == "FORBIDDEN"
    )


def test_bad_decisions_are_refused_before_anything_changes_and_guidance_rejects(live_stack, tokens):
    request_id = filed(live_stack, tokens["agent"], "run-3/call-1")["id"]
    approver = tokens["approver"]

    secret_edit = refused(
        live_stack,
        approver,
        "decide_approval_request",
        requestId=request_id,
        verdict="APPROVED",
        amendedRequest={"headers": {"Authorization": "Bearer mine"}},
    )
    assert secret_edit["errorCode"] == "BAD_REQUEST"
    assert [e["field"] for e in secret_edit["details"]["errors"]] == ["amendedRequest.headers.Authorization"]
    rejecting_edit = refused(
        live_stack,
        approver,
        "decide_approval_request",
        requestId=request_id,
        verdict="REJECTED",
        amendedArguments={"amount": 1},
    )
    assert rejecting_edit["errorCode"] == "BAD_REQUEST"
    blank_guidance = refused(
        live_stack,
        approver,
        "decide_approval_request",
        requestId=request_id,
        verdict="REJECTED",
        guidance=True,
    )
    assert blank_guidance["errorCode"] == "BAD_REQUEST"
    arguments = {"requestId": request_id, "verdict": "REJECTED", "note": "no", "guidance": "yes"}
    (not_a_flag,) = asyncio.run(
        asyncio.wait_for(
            _calls(live_stack.base_url, approver, [("decide_approval_request", arguments)]), CALL_DEADLINE
        )
    )
    assert not_a_flag.is_error and "guidance" in not_a_flag.content[0].text  # refused against the schema
    assert (
        refused(live_stack, approver, "list_approval_requests", status="SOMETIMES")["errorCode"]
        == "BAD_REQUEST"
    )
    assert ApprovalRequest.objects.get(pk=request_id).status == "PENDING"

    guided = ok(
        live_stack,
        approver,
        "decide_approval_request",
        requestId=request_id,
        verdict="REJECTED",
        note="Refund 100 and ask the customer",
        guidance=True,
    )

    assert guided["status"] == "REJECTED"
    assert guided["decision"]["guidance"] == "Refund 100 and ask the customer"
    assert guided["grant"] is None


def test_a_service_accounts_token_is_refused_by_the_surface_before_any_tool(live_stack, tokens):
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}
    agent = accept | {"Authorization": f"Token {tokens['agent']}"}
    with httpx.Client(base_url=live_stack.base_url, timeout=10.0) as http:
        for message in (initialize, listing):
            answer = http.post("/mcp", json=message, headers=agent)
            assert answer.status_code == 403, answer.text
            assert answer.json()["errorCode"] == "FORBIDDEN" and "service account" in answer.json()["error"]
        person = http.post(
            "/mcp", json=initialize, headers=accept | {"Authorization": f"Token {tokens['bob']}"}
        )
        assert person.status_code == 200
    with pytest.raises(ExceptionGroup) as no_session:  # the real client cannot even initialize
        mcp_calls(live_stack, tokens["agent"], ("list_approval_requests", {}))
    assert no_session.group_contains(MCPError, match="error response")
