"""One port, two handlers (hitl_project/serving.py): the REST API through Django's WSGI handler on the
thread pool, the event streams and /mcp through ASGI; a continuation after the answer still runs once the
answer is out. Real PostgreSQL; the application over httpx's ASGI transport."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest
from django.core.asgi import get_asgi_application
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpResponse
from rest_framework.authtoken.models import Token

from approvals.models import Pause, PauseStatus, SubjectType
from conversations.models import Conversation
from harnesses.factories import account_bot, deployed_agent, paused_conversation, start
from harnesses.users import client_for
from hitl_project import wsgi_bridge
from hitl_project.serving import rest_through_wsgi
from hitl_project.wsgi_bridge import ThreadPoolWSGI
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


# The bridge itself (hitl_project/wsgi_bridge.py), around small WSGI applications


def served(app: Any, request: Any) -> httpx.Response:
    async def run() -> httpx.Response:
        transport = httpx.ASGITransport(app=ThreadPoolWSGI(app, workers=2))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=10) as client:
            return await request(client)

    return asyncio.run(run())


class Recorded:
    """A WSGI application that answers what it read, and records the thread it ran and was closed on."""

    def __init__(self, *, streamed: bool) -> None:
        self.streamed = streamed
        self.threads: dict[str, int] = {}
        self.read = b""

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        self.threads["ran"] = threading.get_ident()
        self.read = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))  # as WSGI reads
        start_response("201 Created", [("Content-Type", "text/plain"), ("X-Read", str(len(self.read)))])
        if self.streamed:
            return Closing(self, [b"one ", b"two"])
        response = HttpResponse(b"read " + self.read, status=201)
        response.close = lambda: self.threads.__setitem__("closed", threading.get_ident())
        return response


class Closing(list):
    def __init__(self, app: Recorded, chunks: list[bytes]) -> None:
        super().__init__(chunks)
        self.app = app

    def close(self) -> None:
        self.app.threads["closed"] = threading.get_ident()


async def chunks(*parts: bytes) -> Any:
    for part in parts:
        yield part


@pytest.fixture
def hand_overs(monkeypatch) -> list[list[str]]:
    batches: list[list[str]] = []
    original = wsgi_bridge.hand_over

    def recorded(loop, send, messages):
        batches.append([message["type"] for message in messages])
        return original(loop, send, messages)

    monkeypatch.setattr(wsgi_bridge, "hand_over", recorded)
    return batches


@pytest.mark.django_db(transaction=False)
def test_a_small_answer_goes_back_in_one_hop_and_is_closed_on_its_thread(hand_overs):
    app = Recorded(streamed=False)

    answer = served(app, lambda client: client.post("/x", content=b"hello"))

    assert (answer.status_code, answer.content) == (201, b"read hello")
    assert hand_overs == [["http.response.start", "http.response.body"]]
    assert app.threads["closed"] == app.threads["ran"]


@pytest.mark.django_db(transaction=False)
def test_a_streamed_answer_goes_back_chunk_by_chunk(hand_overs):
    app = Recorded(streamed=True)

    answer = served(app, lambda client: client.get("/x"))

    assert (answer.status_code, answer.content) == (201, b"one two")
    assert len(hand_overs) == 4  # the start, two chunks, the end
    assert app.threads["closed"] == app.threads["ran"]


@pytest.mark.django_db(transaction=False)
def test_a_chunked_body_is_read_on_the_loop_and_handed_over_with_its_length(hand_overs):
    app = Recorded(streamed=False)

    answer = served(app, lambda client: client.post("/x", content=chunks(b"chunked ", b"body")))

    assert answer.status_code == 201 and app.read == b"chunked body"
    assert answer.headers["X-Read"] == str(len(b"chunked body"))
    assert hand_overs == [["http.response.start", "http.response.body"]]


@pytest.mark.django_db(transaction=False)
def test_a_body_over_the_limit_streams_to_the_thread(hand_overs):
    app = Recorded(streamed=False)
    body = b"x" * (wsgi_bridge.BUFFERED_BODY_LIMIT + 1)

    answer = served(app, lambda client: client.post("/x", content=body))

    assert answer.status_code == 201 and app.read == body
    assert hand_overs == []  # a2wsgi's path


def test_a_chunked_json_body_reaches_the_view_and_one_over_django_s_limit_is_a_413(alice, settings):
    conversation_id = start(client_for(alice), deployed_agent(account_bot()))
    token = Token.objects.get(user=alice).key
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096

    async def run() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=with_mcp(rest_through_wsgi(get_asgi_application())))
        headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=30) as client:
            path = f"/agents/{conversation_id}"
            said = await client.post(path, content=chunks(b'{"input": ', b'"hello"}'), headers=headers)
            large = b'{"input": "' + b"x" * 5000 + b'"}'
            refused = await client.post(path, content=chunks(large[:3000], large[3000:]), headers=headers)
            return [said, refused]

    said, refused = asyncio.run(run())

    assert said.status_code == 200 and said.json()["output"] == ["Hello!"], said.text
    assert refused.status_code == 413, refused.text
