"""The MCP surface at /mcp, driven by the official ``mcp`` client against a live uvicorn.

The server runs without q-clusters: decisions continue in the deciding process, so every tool answers
with the conversation (or discussion) as it continued. Every call runs under a hard deadline. Every
answer is kept, and no answer of the module may carry a tool call's raw secret or the canary secret.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from approvals.models import AuditEntry
from conversations.models import Agent, Conversation
from harnesses.agents import AFTER_TOOLS, payments_agent
from harnesses.factories import deployed_agent
from harnesses.live_stack import LiveStack, api_user, running_stack
from harnesses.members import PHASES, answering, asked, echoing, group
from tests.conftest import CANARY_SECRET_NAME

pytestmark = pytest.mark.django_db(transaction=True)

CALL_DEADLINE = 20.0
# a key-shaped argument the model wrote: shown to the approver deciding it, redacted everywhere else
RAW_SECRET = "sk-" + "r4wS3cretArgumentValue" * 2
VAULT = "${vault:" + CANARY_SECRET_NAME + "}"
ANSWERS: list[str] = []  # every answer text of the module, for the leak checks


@pytest.fixture(scope="module")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveStack]:
    yield from running_stack(django_db_blocker, tmp_path_factory.mktemp("mcp-stack"), qclusters=False)


@pytest.fixture
def tokens(live_stack: LiveStack) -> dict[str, str]:
    return {
        "alice": api_user("alice"),
        "bob": api_user("bob"),
        "approver": api_user("approver", "approver"),
        "admin": api_user("admin", "admin"),
    }


async def _calls(base_url: str, token: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    headers = {"Authorization": f"Token {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(15.0)) as http:
        async with streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return [await session.call_tool(name, arguments) for name, arguments in calls]


def mcp_calls(stack: LiveStack, token: str, *calls: tuple[str, dict[str, Any]]) -> list[tuple[bool, Any]]:
    """Each call's (is_error, JSON answer), over one MCP session of ``token``'s owner."""
    results = asyncio.run(asyncio.wait_for(_calls(stack.base_url, token, list(calls)), CALL_DEADLINE))
    answers = []
    for result in results:
        (content,) = result.content
        ANSWERS.append(content.text)
        answers.append((result.is_error, json.loads(content.text)))
    return answers


def ok(stack: LiveStack, token: str, tool: str, **arguments: Any) -> Any:
    ((is_error, body),) = mcp_calls(stack, token, (tool, arguments))
    assert not is_error, body
    return body


def refused(stack: LiveStack, token: str, tool: str, **arguments: Any) -> dict[str, Any]:
    ((is_error, body),) = mcp_calls(stack, token, (tool, arguments))
    assert is_error, body
    return body


def transfers_agent(target_url: str) -> str:
    """Two gated transfers in one batch, one argument secret-shaped, the request sending the canary."""
    script = [
        AFTER_TOOLS,
        {
            "when": {"inputContains": "transfer"},
            "toolCalls": [
                {"id": "call-1", "name": "transfer_funds", "arguments": {"amount": 100, "to": "bob"}},
                {"id": "call-2", "name": "transfer_funds", "arguments": {"amount": 7, "to": RAW_SECRET}},
            ],
        },
        {"reply": "How can I help?"},
    ]
    document = payments_agent(target_url, script=script, hitl_config={"allowSelfApproval": False})
    request = document["workflows"][0]["tasks"][1]["calls"][0]["request"]
    request["headers"] = {"X-Api-Key": VAULT}
    return deployed_agent(document)


def rule_agent() -> str:
    """Answers, and asks for a human approval (PAUSE_CONVERSATION) whenever it is asked a question."""
    return asked("asker", "PAUSE_CONVERSATION")


def test_a_request_without_a_valid_token_is_refused_before_any_tool(live_stack, tokens):
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
    accept = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=live_stack.base_url, timeout=10.0) as http:
        assert http.post("/mcp", json=initialize, headers=accept).status_code == 401
        wrong = http.post("/mcp", json=initialize, headers=accept | {"Authorization": "Token nope"})
        assert wrong.status_code == 401 and wrong.json()["errorCode"] == "UNAUTHENTICATED"
        assert wrong.headers["www-authenticate"].startswith('Token realm="hitl", error="invalid_token"')
        assert http.get("/.well-known/oauth-protected-resource").status_code == 404  # no OAuth: docs/mcp.md
        basic = http.post(
            "/mcp", json=initialize, headers=accept | {"Authorization": f"Basic {tokens['alice']}"}
        )
        assert basic.status_code == 401  # another scheme, the key or not
        bearer = http.post(
            "/mcp", json=initialize, headers=accept | {"Authorization": f"Bearer {tokens['alice']}"}
        )
        assert bearer.status_code == 200  # the same key as EDDI's clients send it
        good = accept | {"Authorization": f"Token {tokens['alice']}"}
        assert http.post("/mcp", json=initialize, headers=good).status_code == 200
        rebound = http.post("/mcp", json=initialize, headers=good | {"Host": "evil.example"})
        assert rebound.status_code == 421  # DNS-rebinding protection: the host is not in ALLOWED_HOSTS
        assert http.get("/healthz").status_code == 200  # Django still answers beside /mcp


def test_talk_pauses_for_approval_and_resume_with_per_call_decisions_continues_it(
    live_stack, tokens, http_recorder, canary_secret
):
    agent_id = transfers_agent(http_recorder.url)
    paused = ok(live_stack, tokens["alice"], "talk_to_agent", agentId=agent_id, message="please transfer")
    assert paused["status"] == "PAUSED_FOR_APPROVAL" and paused["suggestNextTool"] == "resume_conversation"
    assert paused["pauseType"] == "TOOL_CALL" and paused["tools"] == ["transfer_funds"]
    assert paused["conversationState"] == "AWAITING_HUMAN"
    conversation_id = paused["conversationId"]
    assert [r for r in http_recorder.requests if r["path"] == "/transfers"] == []

    inbox = ok(live_stack, tokens["approver"], "list_pending_approvals")["approvals"]
    assert [row["conversationId"] for row in inbox] == [conversation_id]
    assert inbox[0]["pauseType"] == "TOOL_CALL" and inbox[0]["toolNames"] == ["transfer_funds"]
    # what is asked, by whom, on the row itself: no call per row
    assert inbox[0]["latestInput"] == "please transfer"
    assert inbox[0]["agentName"] == Agent.objects.get(pk=agent_id).name

    status = ok(live_stack, tokens["approver"], "get_approval_status", conversationId=conversation_id)
    calls = status["pauseDetails"]["calls"]
    assert [call["callId"] for call in calls] == ["call-1", "call-2"]
    assert json.loads(calls[0]["arguments"]) == {"amount": 100, "to": "bob"}
    # the approver deciding it sees what the model wrote, with a warning; the owner's view hides it
    assert json.loads(calls[1]["arguments"])["to"] == RAW_SECRET
    assert [warning["field"] for warning in calls[1]["warnings"]] == ["arguments.to", "request.body"]
    owner_view = ok(live_stack, tokens["alice"], "get_approval_status", conversationId=conversation_id)
    assert "<REDACTED>" in owner_view["pauseDetails"]["calls"][1]["arguments"]
    assert RAW_SECRET not in json.dumps(owner_view)
    full = ok(
        live_stack, tokens["approver"], "get_approval_status", conversationId=conversation_id, detail="full"
    )
    assert full["conversation"]["state"] == "AWAITING_HUMAN"
    for hidden in ("transcript", "argumentsRaw", "fingerprint", "frozenTranscript"):
        assert hidden not in json.dumps(full), hidden

    # Separation of duties: the user whose talk raised the pause may not decide it, over MCP either.
    self_approval = refused(
        live_stack, tokens["alice"], "resume_conversation", conversationId=conversation_id, verdict="APPROVED"
    )
    assert self_approval["errorCode"] == "FORBIDDEN" and "Self-approval" in self_approval["error"]

    resumed = ok(
        live_stack,
        tokens["approver"],
        "resume_conversation",
        conversationId=conversation_id,
        verdict="approved",
        note="only the first",
        toolDecisions={
            "call-1": {"verdict": "APPROVED", "amendedArguments": {"amount": 90, "to": "bob"}},  # an object
            "call-2": {"verdict": "REJECTED", "note": "not that one"},
        },
    )
    assert resumed["status"] == "RESUMED" and resumed["decidedBy"] == "mcp:approver"
    assert resumed["continuation"] == "continued" and resumed["conversation"]["state"] == "READY"
    assert resumed["conversation"]["lastDecision"]["decidedBy"] == "mcp:approver"
    results = json.loads(resumed["conversation"]["output"][-1].removeprefix("Done: "))
    assert [r["status"] for r in results] == ["EXECUTED", "REJECTED_BY_REVIEWER"]
    (sent,) = [r for r in http_recorder.requests if r["path"] == "/transfers"]
    assert (
        json.loads(sent["body"]) == {"amount": "90", "to": "bob"}
        and sent["headers"]["X-Api-Key"] == canary_secret
    )
    entry = AuditEntry.objects.get(verb="hitl.approval", subject_id=conversation_id)
    assert entry.actor == "mcp:approver"

    again = refused(
        live_stack,
        tokens["approver"],
        "resume_conversation",
        conversationId=conversation_id,
        verdict="APPROVED",
    )
    assert again["errorCode"] == "WRONG_STATE" and again["details"]["currentState"] == "READY"
    assert [text for text in ANSWERS if canary_secret in text] == []
    shown_raw = [text for text in ANSWERS if RAW_SECRET in text]
    assert len(shown_raw) == 2 and all('"warnings"' in text for text in shown_raw)  # the approver's two reads


async def _tools(base_url: str, token: str) -> list[Any]:
    headers = {"Authorization": f"Token {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(15.0)) as http:
        async with streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return (await session.list_tools()).tools


def test_arguments_that_do_not_fit_are_refused_with_an_error_code_naming_each_field(live_stack, tokens):
    wrong_type = refused(live_stack, tokens["approver"], "list_pending_approvals", limit="many")
    assert (wrong_type["errorCode"], wrong_type["error"]) == ("BAD_REQUEST", "Invalid arguments: limit")
    [error] = wrong_type["details"]["errors"]
    assert error["field"] == "limit" and error["message"].startswith("Input should be a valid integer")
    assert "many" not in json.dumps(wrong_type)  # what was sent is not echoed
    misspelt = refused(
        live_stack,
        tokens["approver"],
        "resume_conversation",
        conversationId="c",
        verdict="APPROVED",
        notes="x",
    )
    assert misspelt["details"]["errors"] == [{"field": "notes", "message": "Extra inputs are not permitted"}]


def test_the_tools_say_what_they_do_to_a_host(live_stack, tokens):
    tools = {tool.name: tool for tool in asyncio.run(_tools(live_stack.base_url, tokens["approver"]))}
    # approving runs what the agent asked for (a transfer, a deletion); a talk runs the agent's tools
    for name in ("resume_conversation", "approve_group_phase", "decide_approval_request", "talk_to_agent"):
        annotations = tools[name].annotations
        assert annotations.destructive_hint is True and annotations.read_only_hint is False, name
    for name in ("list_pending_approvals", "get_approval_status", "list_approval_requests"):
        assert tools[name].annotations.read_only_hint is True, name
    for tool in tools.values():  # approvals, not the REST API's paths
        assert "GET /" not in tool.description and "REST" not in tool.description, tool.name


def test_who_may_read_and_decide_a_pause_over_mcp(live_stack, tokens):
    agent_id = rule_agent()
    paused = ok(live_stack, tokens["alice"], "talk_to_agent", agentId=agent_id, message="a question?")
    assert paused["status"] == "PAUSED_FOR_APPROVAL" and paused["pauseType"] == "RULE"
    conversation_id = paused["conversationId"]
    for reader in ("alice", "approver", "admin"):
        status = ok(live_stack, tokens[reader], "get_approval_status", conversationId=conversation_id)
        assert status["state"] == "AWAITING_HUMAN" and status["pauseType"] == "RULE", reader
    assert (
        refused(live_stack, tokens["bob"], "get_approval_status", conversationId=conversation_id)["errorCode"]
        == "FORBIDDEN"
    )
    assert ok(live_stack, tokens["bob"], "list_pending_approvals") == {"approvals": []}
    assert [
        r["conversationId"] for r in ok(live_stack, tokens["alice"], "list_pending_approvals")["approvals"]
    ] == [conversation_id]
    for decider in ("bob",):
        body = refused(
            live_stack,
            tokens[decider],
            "resume_conversation",
            conversationId=conversation_id,
            verdict="APPROVED",
        )
        assert body["errorCode"] == "FORBIDDEN"
        assert (
            refused(live_stack, tokens[decider], "cancel_conversation", conversationId=conversation_id)[
                "errorCode"
            ]
            == "FORBIDDEN"
        )
    unknown = str(uuid.uuid4())
    assert (
        refused(live_stack, tokens["admin"], "get_approval_status", conversationId=unknown)["errorCode"]
        == "NOT_FOUND"
    )
    assert (
        refused(live_stack, tokens["bob"], "get_approval_status", conversationId=unknown)["errorCode"]
        == "FORBIDDEN"
    )
    bad = refused(
        live_stack, tokens["alice"], "resume_conversation", conversationId=conversation_id, verdict="maybe"
    )
    assert bad["errorCode"] == "BAD_REQUEST"
    blank = refused(
        live_stack, tokens["alice"], "resume_conversation", conversationId=" ", verdict="APPROVED"
    )
    assert blank["errorCode"] == "BAD_REQUEST"
    # Pinned while paused: a further message is not consumed.
    still = ok(live_stack, tokens["alice"], "talk_to_agent", conversationId=conversation_id, message="hello?")
    assert still["status"] == "PAUSED_FOR_APPROVAL"
    # The owner may decide her own pause (this agent allows self-approval, the default).
    resumed = ok(
        live_stack, tokens["alice"], "resume_conversation", conversationId=conversation_id, verdict="APPROVED"
    )
    assert resumed["decidedBy"] == "mcp:alice" and resumed["conversation"]["state"] == "READY"
    assert resumed["conversation"]["output"] == ["asker answers."]


def test_cancel_ends_the_pending_approval_once(live_stack, tokens):
    agent_id = rule_agent()
    conversation_id = ok(live_stack, tokens["alice"], "talk_to_agent", agentId=agent_id, message="question")[
        "conversationId"
    ]
    cancelled = ok(live_stack, tokens["approver"], "cancel_conversation", conversationId=conversation_id)
    assert cancelled["status"] == "CANCELLED" and cancelled["conversation"]["state"] != "AWAITING_HUMAN"
    assert AuditEntry.objects.filter(subject_id=conversation_id, actor="mcp:approver").exists()
    again = refused(live_stack, tokens["alice"], "cancel_conversation", conversationId=conversation_id)
    assert again["errorCode"] == "WRONG_STATE" and "currentState" in again["details"]
    status = ok(live_stack, tokens["alice"], "get_approval_status", conversationId=conversation_id)
    assert status["pauseId"] is None and status["lastDecision"]["cancelledBy"] == "mcp:approver"


def test_chat_managed_keeps_one_conversation_per_agent(live_stack, tokens):
    agent_id = answering("plain", "Hello from plain.")
    first = ok(live_stack, tokens["alice"], "chat_managed", agentId=agent_id, message="hi")
    second = ok(live_stack, tokens["alice"], "chat_managed", agentId=agent_id, message="again")
    assert first["status"] == second["status"] == "OK" and first["conversationId"] == second["conversationId"]
    assert second["output"] == ["Hello from plain."]
    other = ok(live_stack, tokens["bob"], "chat_managed", agentId=agent_id, message="hi")
    assert other["conversationId"] != first["conversationId"]
    assert Conversation.objects.filter(agent_id=agent_id).count() == 2
    missing = refused(live_stack, tokens["alice"], "talk_to_agent", message="hi")
    assert missing["errorCode"] == "BAD_REQUEST"


def test_group_tools_read_decide_and_cancel_a_discussion(live_stack, tokens):
    group_id = group([(answering("a", "Yes."), "optimist"), (answering("b", "No."), "skeptic")], PHASES)
    with live_stack.client(tokens["alice"]) as rest:
        first = rest.post(f"/groups/{group_id}/conversations", json={"question": "Ship?"}).json()
        second = rest.post(f"/groups/{group_id}/conversations", json={"question": "Ship now?"}).json()
    assert first["state"] == second["state"] == "AWAITING_APPROVAL"
    mine = ok(live_stack, tokens["alice"], "list_group_pending_approvals", groupId=group_id)["approvals"]
    assert [row["conversationId"] for row in mine] == [first["discussionId"], second["discussionId"]]
    assert [(row["groupName"], row["latestInput"]) for row in mine] == [
        ("panel", "Ship?"),
        ("panel", "Ship now?"),
    ]
    every = ok(live_stack, tokens["approver"], "list_all_group_pending_approvals", limit=1)["approvals"]
    assert [row["conversationId"] for row in every] == [first["discussionId"]]
    assert ok(live_stack, tokens["bob"], "list_all_group_pending_approvals") == {"approvals": []}
    ids = {"groupId": group_id, "conversationId": first["discussionId"]}
    status = ok(live_stack, tokens["approver"], "get_group_approval_status", **ids)
    assert status["pauseType"] == "PHASE" and status["phaseName"] == "Challenge"
    full = ok(live_stack, tokens["approver"], "get_group_approval_status", detail="full", **ids)
    assert full["discussion"]["state"] == "AWAITING_APPROVAL"
    assert refused(live_stack, tokens["bob"], "get_group_approval_status", **ids)["errorCode"] == "FORBIDDEN"
    assert (
        refused(live_stack, tokens["bob"], "approve_group_phase", verdict="APPROVED", **ids)["errorCode"]
        == "FORBIDDEN"
    )
    assert (
        refused(live_stack, tokens["approver"], "approve_group_phase", verdict="later", **ids)["errorCode"]
        == "BAD_REQUEST"
    )
    task_map = refused(
        live_stack,
        tokens["approver"],
        "approve_group_phase",
        verdict="APPROVED",
        taskApprovals={"t1": "APPROVED"},
        **ids,
    )
    assert task_map["errorCode"] == "BAD_REQUEST"  # a PHASE pause takes no task verdicts

    approved = ok(live_stack, tokens["approver"], "approve_group_phase", verdict="APPROVED", note="go", **ids)
    assert approved["status"] == "RESUMED" and approved["decidedBy"] == "mcp:approver"
    assert approved["discussion"]["state"] == "COMPLETED"
    assert (
        refused(live_stack, tokens["approver"], "approve_group_phase", verdict="APPROVED", **ids)["errorCode"]
        == "WRONG_STATE"
    )

    other = {"groupId": group_id, "conversationId": second["discussionId"]}
    cancelled = ok(live_stack, tokens["alice"], "cancel_group_discussion", **other)
    assert cancelled["status"] == "CANCELLED" and cancelled["discussion"]["state"] == "CANCELLED"
    assert (
        refused(live_stack, tokens["alice"], "cancel_group_discussion", **other)["errorCode"] == "WRONG_STATE"
    )
    unknown = refused(live_stack, tokens["alice"], "list_group_pending_approvals", groupId=str(uuid.uuid4()))
    assert unknown["errorCode"] == "NOT_FOUND"


def test_the_kill_switch_disables_every_mutating_tool_first_and_keeps_the_reads(
    live_stack, django_db_blocker, tmp_path, tokens
):
    rule_agent_id = rule_agent()
    conversation_id = ok(
        live_stack, tokens["alice"], "talk_to_agent", agentId=rule_agent_id, message="question"
    )["conversationId"]
    read_only = running_stack(
        django_db_blocker, tmp_path, qclusters=False, HITL_MCP_MUTATIONS_ENABLED="false"
    )
    stack = next(read_only)
    try:
        answers = mcp_calls(
            stack,
            tokens["approver"],
            ("resume_conversation", {"conversationId": conversation_id, "verdict": "APPROVED"}),
            ("resume_conversation", {"conversationId": "", "verdict": "not-a-verdict"}),
            ("cancel_conversation", {"conversationId": conversation_id}),
            ("approve_group_phase", {"groupId": "", "conversationId": "", "verdict": "APPROVED"}),
            ("cancel_group_discussion", {"groupId": "", "conversationId": ""}),
            ("talk_to_agent", {"agentId": rule_agent_id, "message": "question"}),
            ("chat_managed", {"agentId": rule_agent_id, "message": "question"}),
            ("decide_approval_request", {"requestId": "", "verdict": "not-a-verdict"}),
            ("cancel_approval_request", {"requestId": str(uuid.uuid4())}),
            ("list_pending_approvals", {}),
            ("get_approval_status", {"conversationId": conversation_id}),
            ("list_approval_requests", {}),
        )
    finally:
        read_only.close()
    for is_error, body in answers[:9]:
        assert is_error and body["errorCode"] == "DISABLED", body
        assert body["details"]["property"] == "HITL_MCP_MUTATIONS_ENABLED"
    (_, inbox), (_, status), (_, requests) = answers[9:]
    assert [row["conversationId"] for row in inbox["approvals"]] == [conversation_id]
    assert status["state"] == "AWAITING_HUMAN"
    assert requests == {"approvalRequests": []}


def test_approve_group_phase_applies_per_task_verdicts_of_a_task_gate(live_stack, tokens):
    worker = echoing("worker")
    group_id = group(
        [(worker, "Worker")],
        [
            {
                "name": "Build",
                "type": "EXECUTE",
                "requiresApproval": True,
                "tasks": [
                    {"id": "a", "description": "do a", "assignee": worker},
                    {"id": "b", "description": "do b", "assignee": worker},
                ],
            }
        ],
        hitlConfig={"granularity": "TASK", "onTaskRejection": "RETRY"},
    )
    with live_stack.client(tokens["alice"]) as rest:
        paused = rest.post(f"/groups/{group_id}/conversations", json={"question": "Build it"}).json()
    ids = {"groupId": group_id, "conversationId": paused["discussionId"]}
    status = ok(live_stack, tokens["approver"], "get_group_approval_status", **ids)
    assert status["pauseType"] == "TASK" and status["awaitingTaskIds"] == ["a", "b"]

    resumed = ok(
        live_stack,
        tokens["approver"],
        "approve_group_phase",
        verdict="APPROVED",
        note="say why",
        taskApprovals={"a": "approved", "b": "REJECTED"},
        **ids,
    )

    tasks = {task["id"]: task for task in resumed["discussion"]["tasks"]}
    assert tasks["a"]["status"] == "COMPLETED"
    assert tasks["b"]["status"] == "AWAITING_APPROVAL" and "say why" in tasks["b"]["result"]  # retried
    assert resumed["discussion"]["state"] == "AWAITING_APPROVAL"
    unknown = refused(
        live_stack,
        tokens["approver"],
        "approve_group_phase",
        verdict="APPROVED",
        taskApprovals={"zz": "APPROVED"},
        **ids,
    )
    assert unknown["errorCode"] == "BAD_REQUEST"
    assert unknown["details"]["errors"] == [
        {"field": "taskApprovals.zz", "message": "Unknown taskId in taskApprovals: 'zz'"}
    ]
