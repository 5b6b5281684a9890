"""Bad bodies against the running server (uvicorn, httpx): a 4xx problem each, and nothing consumed.

The bugs were seen over HTTP: a NUL byte left a conversation IN_PROGRESS behind a 500, an oversized
body was a 500, deep JSON a RecursionError, and an export with an offset PostgreSQL rejects a 200 whose
stream broke off. Here they go over a real socket to a real server, and the conversation stays usable.
"""

from __future__ import annotations

import httpx
import pytest
from django.conf import settings

from approvals.models import Pause, PauseStatus
from conversations.models import Conversation, ConversationStep
from harnesses.live_stack import LiveStack, api_user
from tests.e2e.test_live_approval_flow import ask_for_deletion, deployed_demo_agent, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)

PROBLEM = "application/problem+json"
JSON = {"Content-Type": "application/json"}


def state_of(conversation_id: str) -> tuple[str, int]:
    steps = ConversationStep.objects.filter(conversation_id=conversation_id).count()
    return Conversation.objects.get(pk=conversation_id).state, steps


def assert_problem(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"] == PROBLEM
    return response.json()


def test_bad_bodies_over_http_are_4xx_and_the_conversation_stays_usable(live_stack: LiveStack):
    admin = live_stack.client(api_user("admin", "admin"))
    alice = live_stack.client(api_user("alice"))
    approver = live_stack.client(api_user("approver", "approver"))
    with admin, alice, approver:
        agent_id = deployed_demo_agent(admin)
        conversation_id = start_conversation(alice, agent_id)
        url = f"/agents/{conversation_id}"
        before = state_of(conversation_id)

        nul = assert_problem(alice.post(url, content=b'{"input": "a\\u0000b"}', headers=JSON), 400)
        assert [e["field"] for e in nul["errors"]] == ["input"]
        surrogate = assert_problem(
            alice.post(url, content=b'{"input": "hi", "context": {"k": "\\ud800"}}', headers=JSON), 400
        )
        assert [e["field"] for e in surrogate["errors"]] == ["context.k"]

        oversized = b'{"input": "' + b"x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1) + b'"}'
        too_big = assert_problem(alice.post(url, content=oversized, headers=JSON), 413)
        assert too_big["status"] == 413 and too_big["errors"][0]["field"] == "body"

        deep = b"[" * 100_000 + b"]" * 100_000
        assert "nested" in assert_problem(alice.post(url, content=deep, headers=JSON), 400)["detail"]

        unknown = assert_problem(alice.post(url, json={"input": "hello", "contxt": {}}), 400)
        assert [e["field"] for e in unknown["errors"]] == ["contxt"]

        assert state_of(conversation_id) == before
        said = alice.post(url, json={"input": "hello"})
        assert said.status_code == 200, said.text
        assert said.json()["state"] == "READY" and said.json()["output"] == ["Hello!"]

        # A bad resume consumes nothing either.
        ask_for_deletion(alice, conversation_id)
        resume = f"/agents/{conversation_id}/resume"
        note = assert_problem(
            approver.post(resume, content=b'{"verdict": "APPROVED", "note": "\\u0000"}', headers=JSON), 400
        )
        assert [e["field"] for e in note["errors"]] == ["note"]
        verdict = assert_problem(approver.post(resume, json={"verdict": "MAYBE"}), 400)
        assert verdict["detail"] == "verdict 'MAYBE' must be APPROVED or REJECTED"
        assert Pause.objects.get(subject_id=conversation_id).status == PauseStatus.PENDING
        assert approver.post(resume, json={"verdict": "REJECTED", "note": "no"}).status_code == 200

        # The export refuses before its first byte, whichever way the "+" travels.
        for since in ("2026-11-30T10:00:00%2B16:00", "2026-11-30T10:00:00+16:00"):
            export = admin.get(f"/audit/export?format=csv&since={since}")
            assert [e["field"] for e in assert_problem(export, 400)["errors"]] == ["since"]
            entries = admin.get(f"/audit/entries?since={since}")
            assert [e["field"] for e in assert_problem(entries, 400)["errors"]] == ["since"]


def test_bad_paths_and_queries_over_http_are_problem_details(live_stack: LiveStack):
    """A path with a control character is the API's 404, not the ASGI router's text/plain one; a query
    parameter that is repeated, not of its type or empty where typed is a 400 naming it."""
    approver = live_stack.client(api_user("approver", "approver"))
    admin = live_stack.client(api_user("admin", "admin"))
    with approver, admin:
        for path in ("/agents/%0A/approval-status", "/groupstore/groups/a%0Db", "/%0A", "/mcp%0A"):
            assert assert_problem(approver.get(path), 404)["code"] == "NOT_FOUND", path

        for query in ("limit=null&limit=null", "limit=abc", "limit="):
            inbox = assert_problem(approver.get(f"/agents/pending-approvals?{query}"), 400)
            assert [e["field"] for e in inbox["errors"]] == ["limit"], query
        entries = assert_problem(admin.get("/audit/entries?until="), 400)
        assert [e["field"] for e in entries["errors"]] == ["until"]
