"""One port, two handlers (hitl_project/serving.py): the REST API through Django's WSGI handler on the
thread pool, the event streams and /mcp through ASGI; a continuation after the answer still runs once the
answer is out. Real PostgreSQL; the application over httpx's ASGI transport."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from django.core.asgi import get_asgi_application
from django.core.handlers.wsgi import WSGIHandler
from rest_framework.authtoken.models import Token

from approvals.models import Pause, PauseStatus, SubjectType
from conversations.models import Conversation
from harnesses.factories import paused_conversation
from harnesses.users import client_for
from hitl_project.serving import rest_through_wsgi
from mcp_surface.asgi import with_mcp

pytestmark = pytest.mark.django_db(transaction=True)


def over_asgi(calls: list[tuple[str, str, dict[str, Any] | None]], token: str) -> list[httpx.Response]:
    app = with_mcp(rest_through_wsgi(get_asgi_application()))

    async def run() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Token {token}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=30) as client:
            return [
                await client.request(method, path, json=body, headers=headers) for method, path, body in calls
            ]

    return asyncio.run(run())


@pytest.fixture
def wsgi_calls(monkeypatch) -> list[str]:
    served: list[str] = []
    original = WSGIHandler.__call__

    def counted(self, environ, start_response):
        served.append(environ["PATH_INFO"])
        return original(self, environ, start_response)

    monkeypatch.setattr(WSGIHandler, "__call__", counted)
    return served


def test_the_rest_api_goes_through_the_wsgi_handler_and_the_streams_do_not(admin_user, wsgi_calls):
    token = Token.objects.get_or_create(user=admin_user)[0].key

    read, stream, events, export = over_asgi(
        [
            ("GET", "/agentstore/agents", None),
            ("POST", "/groups/00000000-0000-0000-0000-000000000000/conversations/stream", {"question": "q"}),
            ("GET", "/approval-requests/00000000-0000-0000-0000-000000000000/events", None),
            ("GET", "/audit/export?format=jsonl&actor=nobody", None),
        ],
        token,
    )

    assert read.status_code == export.status_code == 200
    assert stream.status_code == events.status_code == 404  # no such group, no such request: the ASGI
    # handler answers them as the WSGI one would
    assert wsgi_calls == ["/agentstore/agents"]  # /mcp is the MCP endpoint's: tests/test_asgi_dispatch.py


def test_a_decision_without_wait_answers_first_and_its_continuation_still_runs(alice, approver, wsgi_calls):
    conversation_id = paused_conversation(client_for(alice))
    token = Token.objects.get_or_create(user=approver)[0].key

    (decided,) = over_asgi([("POST", f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"})], token)

    assert decided.status_code == 200 and decided.json()["state"] == "IN_PROGRESS", decided.text
    assert wsgi_calls == [f"/agents/{conversation_id}/resume"]
    pause = Pause.objects.get(subject_type=SubjectType.CONVERSATION, subject_id=conversation_id)
    assert pause.status == PauseStatus.RESOLVED  # run after the answer, on the request's thread
    assert Conversation.objects.get(pk=conversation_id).state == "READY"
