"""S1, the authorization matrix beyond REST: the admin's approval pages and the MCP tools, every role,
each cell's expected outcome from the one table (harnesses/authz_table.py). Slack's buttons:
tests/slack_surface/test_slack_authorization_matrix.py.

The admin is driven with Django's test client and a session (``force_login``), as a browser would be.
An MCP tool call runs the way the server runs every tool (``mcp_surface.server._call``: the service as
the caller, its failure turned into the tool's structured error); an anonymous call goes through the
real token gate (``mcp_surface.identity.TokenRequired``) over httpx's ASGI transport, and so does a
service account's (refused there: MCP is a surface for people).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from approvals.models import Pause, PauseStatus
from groups.models import GroupConversation
from harnesses.authz_rest import World
from harnesses.authz_table import ROLES, ROUTED, SERVICE_ACCOUNTS, differing, expected, expected_over_mcp
from harnesses.factories import paused_conversation
from mcp_surface import conversation_tools, group_tools, request_tools
from mcp_surface.identity import TokenRequired
from mcp_surface.server import _call

INBOX = "/admin/approvals/pendingapproval/"
AUDIT = "/admin/approvals/auditentry/"
ADMIN_STATES = ("staff's own", "someone else's", "decided", "approval request")


# --- the admin ---------------------------------------------------------------------------------------


def _admin_client(world: World, role: str) -> Client:
    client = Client()
    if role != "anonymous":
        client.force_login(world.users[role])
    return client


def _pause(world: World, state: str) -> Pause:
    if state == "approval request":  # a service account's, made for the owner: no staff's own
        return Pause.objects.get(subject_id=world.subject("approval request", "pending", fresh=True))
    owner = world.clients["staff"] if state == "staff's own" else world.clients["owner"]
    conversation_id = paused_conversation(owner, world.agent_id)
    if state == "decided":
        world.clients["admin"].post(
            f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json"
        )
    return Pause.objects.get(subject_id=conversation_id)


def _admin_outcome(response: Any) -> Any:
    if response.status_code == 302 and "/admin/login/" in response["Location"]:
        return "login"
    return "ok" if response.status_code in (200, 302, 409) else response.status_code


ADMIN_PAGES = {
    "GET inbox": INBOX,
    "GET inbox updates/": INBOX + "updates/?since=2026-01-01T00:00:00Z",
    "GET history": "/admin/approvals/decidedapproval/",
    "GET audit list": AUDIT,
    "GET audit export/": AUDIT + "export/?format=jsonl",
    "GET audit verify/": AUDIT + "verify/",
}


def _decide_page(client: Client, pause: Pause) -> Any:
    return client.post(
        f"{INBOX}{pause.pk}/change/",
        {"expected_pause_id": str(pause.pk), "verdict": "APPROVED", "note": "ok"},
    )


def _bulk(client: Client, pause: Pause) -> Any:
    return client.post(
        INBOX + "bulk-decide/", {"verdict": "APPROVED", "note": "ok", "pause_ids": [str(pause.pk)]}
    )


ADMIN_PAUSE_CALLS = {
    "GET decision page": lambda client, pause: client.get(f"{INBOX}{pause.pk}/change/"),
    "POST decision page": _decide_page,
    "POST bulk-decide/": _bulk,
}


def admin_cells(world: World) -> list[dict[str, Any]]:
    cells = []
    for name, path in ADMIN_PAGES.items():
        for role in ROLES:
            got = _admin_outcome(_admin_client(world, role).get(path))
            cells.append(_cell("admin", name, "-", role, expected("admin staff page", role), got))
    for name, call in ADMIN_PAUSE_CALLS.items():
        for state in ADMIN_STATES:
            for role in ROLES:
                pause = _pause(world, state)
                got = _admin_outcome(call(_admin_client(world, role), pause))
                want = expected("admin pause", role, state)
                # nobody refused decided anything, everyone allowed did (bulk decisions take RULE pauses
                # only, docs/admin-inbox.md: an approval request's is left pending)
                bulk_skips = name == "POST bulk-decide/" and state == "approval request"
                if name != "GET decision page" and state != "decided" and not bulk_skips:
                    decided = Pause.objects.get(pk=pause.pk).status != PauseStatus.PENDING
                    if decided != (want == "ok"):
                        got = f"{got}, {'decided' if decided else 'still pending'}"
                cells.append(_cell("admin", name, state, role, want, got))
    return cells


# --- MCP ------------------------------------------------------------------------------------------------


def _mcp_outcome(result: Any) -> Any:
    body = json.loads(result.content[0].text)
    if not result.is_error:
        return "ok"
    code = body["errorCode"]
    return {"FORBIDDEN": 403, "NOT_FOUND": 404, "WRONG_STATE": "ok", "CONFLICT": "ok"}.get(code, code)


CONV = ("pending", "decided", "unknown")
# the deciding tools are asked again on a subject whose pause is routed to others (harnesses.authz_table.ROUTED)
DECIDING = (*CONV, ROUTED)


def _group_of(world: World, discussion_id: Any) -> str:
    """The group a discussion runs in (the gated group for an id that does not exist)."""
    found = GroupConversation.objects.filter(pk=discussion_id).values_list("group_id", flat=True).first()
    return str(found) if found else world.gated_group


# tool -> (rule, subject kind, states, the service and its arguments for a subject id)
MCP_TOOLS: dict[str, tuple[str, str | None, tuple[str, ...], Any]] = {
    "list_pending_approvals": (
        "signed in",
        None,
        ("-",),
        lambda w, s: (conversation_tools.list_pending_approvals, {}),
    ),
    "list_all_group_pending_approvals": (
        "signed in",
        None,
        ("-",),
        lambda w, s: (group_tools.list_all_group_pending_approvals, {}),
    ),
    "list_group_pending_approvals": (
        "signed in",
        None,
        ("-",),
        lambda w, s: (group_tools.list_group_pending_approvals, {"group_id": w.gated_group}),
    ),
    "chat_managed": (
        "signed in",
        None,
        ("-",),
        lambda w, s: (conversation_tools.chat_managed, {"agent_id": w.agent_id, "message": "hello"}),
    ),
    "get_approval_status": (
        "decider",
        "conversation",
        CONV,
        lambda w, s: (conversation_tools.get_approval_status, {"conversation_id": s}),
    ),
    "get_approval_status detail=full": (
        "reads turns",
        "conversation",
        CONV,
        lambda w, s: (conversation_tools.get_approval_status, {"conversation_id": s, "detail": "full"}),
    ),
    "resume_conversation": (
        "decider",
        "conversation",
        DECIDING,
        lambda w, s: (conversation_tools.resume_conversation, {"conversation_id": s, "verdict": "APPROVED"}),
    ),
    "cancel_conversation": (
        "decider",
        "conversation",
        CONV,
        lambda w, s: (conversation_tools.cancel_conversation, {"conversation_id": s}),
    ),
    "talk_to_agent": (
        "owner or admin",
        "conversation",
        CONV,
        lambda w, s: (conversation_tools.talk_to_agent, {"conversation_id": s, "message": "hello"}),
    ),
    "get_group_approval_status": (
        "decider",
        "discussion",
        CONV,
        lambda w, s: (
            group_tools.get_group_approval_status,
            {"group_id": w.gated_group, "conversation_id": s},
        ),
    ),
    "approve_group_phase": (
        "decider",
        "discussion",
        DECIDING,
        lambda w, s: (
            group_tools.approve_group_phase,
            {"group_id": _group_of(w, s), "conversation_id": s, "verdict": "APPROVED"},
        ),
    ),
    "cancel_group_discussion": (
        "decider",
        "discussion",
        CONV,
        lambda w, s: (group_tools.cancel_group_discussion, {"group_id": w.gated_group, "conversation_id": s}),
    ),
    "list_approval_requests": (
        "lists requests",
        None,
        ("-",),
        lambda w, s: (request_tools.list_approval_requests, {}),
    ),
    "get_approval_request": (
        "request party",
        "approval request",
        CONV,
        lambda w, s: (request_tools.get_approval_request, {"request_id": s}),
    ),
    "decide_approval_request": (
        "request reviewer",
        "approval request",
        DECIDING,
        lambda w, s: (request_tools.decide_approval_request, {"request_id": s, "verdict": "APPROVED"}),
    ),
    "cancel_approval_request": (
        "request party",
        "approval request",
        CONV,
        lambda w, s: (request_tools.cancel_approval_request, {"request_id": s}),
    ),
}


async def _gate_status(token: str | None) -> tuple[int, bool]:
    """An MCP request through the real token gate, with ``token`` or none: its status, and whether it got
    past the gate."""
    reached = []

    async def behind(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    headers = {"Authorization": f"Token {token}"} if token else {}
    transport = httpx.ASGITransport(app=TokenRequired(behind))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers
        )
    return response.status_code, bool(reached)


def _gate_outcome(token: str | None) -> Any:
    status, reached = asyncio.run(_gate_status(token))
    return status if not reached else f"{status}, reached the server"


def mcp_cells(world: World) -> list[dict[str, Any]]:
    """Anonymous callers and service accounts are refused by the token gate in front of the MCP server
    (401, 403), so their cells go through it; a person's tool call runs as the server runs it."""
    at_the_gate = {"anonymous": _gate_outcome(None)}
    for role in SERVICE_ACCOUNTS:
        at_the_gate[role] = _gate_outcome(Token.objects.get(user=world.users[role]).key)
    cells = []
    for tool, (rule, kind, states, call) in MCP_TOOLS.items():
        for state in states:
            for role in ROLES:
                if role in at_the_gate:
                    got = at_the_gate[role]
                else:
                    subject = world.subject(kind, state, fresh=False, user=tool) if kind else None
                    service, arguments = call(world, subject)
                    got = _mcp_outcome(_call(service, world.users[role], arguments))
                    if kind and got == "ok":  # it may have used the subject up: the next role gets a new one
                        world.used(kind, state, tool)
                cells.append(_cell("MCP", tool, state, role, expected_over_mcp(rule, role, state), got))
    return cells


def _cell(surface: str, endpoint: str, state: str, role: str, want: Any, got: Any) -> dict[str, Any]:
    return {
        "surface": surface,
        "endpoint": endpoint,
        "state": state,
        "role": role,
        "expected": want,
        "got": got,
    }


@pytest.mark.usefixtures("continuations_queued")
def test_admin_authorization_matrix_matches_the_docs_in_every_cell(db, capsys):
    cells = admin_cells(World.build())

    wrong = differing(cells)
    with capsys.disabled():
        print(f"\nS1 admin matrix: {len(cells)} cells run, {len(cells) - len(wrong)} matching")
    assert wrong == [], "\n".join(wrong)


@pytest.fixture
def connection_kept(monkeypatch):
    """The tool dispatch closes stale connections around each call (a server's habit); inside a test's
    transaction that would close the test's own connection, so it is kept here."""
    monkeypatch.setattr("mcp_surface.server.close_old_connections", lambda: None)


def test_every_mcp_tool_is_a_row_of_the_matrix():
    """A new tool fails here until the table says who may call it."""
    from mcp_surface.server import build_server

    tools = {tool.name for tool in build_server()._tool_manager.list_tools()}
    assert tools == {name.split()[0] for name in MCP_TOOLS}


@pytest.mark.usefixtures("continuations_queued", "connection_kept")
def test_mcp_authorization_matrix_matches_the_docs_in_every_cell(transactional_db, capsys):
    """Committed users (``transactional_db``): the token gate looks a token up on a thread of its own."""
    cells = mcp_cells(World.build())

    wrong = differing(cells)
    with capsys.disabled():
        print(f"\nS1 MCP matrix: {len(cells)} cells run, {len(cells) - len(wrong)} matching")
    assert wrong == [], "\n".join(wrong)


@pytest.mark.usefixtures("connection_kept")
def test_an_unknown_tool_subject_id_is_no_oracle(db):
    """A plain user's answer for an unknown id is the same refusal as for someone else's (403)."""
    world = World.build()
    someone_elses = world.subject("conversation", "pending", fresh=False)
    answers = [
        json.loads(
            _call(conversation_tools.get_approval_status, world.users["other"], {"conversation_id": c})
            .content[0]
            .text
        )
        for c in (someone_elses, str(uuid.uuid4()))
    ]
    assert answers[0] == answers[1] and answers[0]["errorCode"] == "FORBIDDEN"
