"""The gate across tool sources, each through a real turn: mcp (a real MCP server on loopback), builtin,
memory, recall and a2a (a second deployed agent that pauses), and which tool wins a name collision."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.server import MCPServer

from approvals.models import Pause, PauseStatus
from conversations.models import Conversation
from harnesses.agents import AFTER_TOOLS
from harnesses.factories import account_bot, deployed_agent, say, start
from harnesses.queue_drain import run_queued_tasks
from tests.toolgate.test_mcp_source import serving

pytestmark = pytest.mark.django_db

CALLED: list[tuple[str, dict[str, Any]]] = []


def crm_server() -> MCPServer:
    """An MCP server that records every tool call it receives."""
    server = MCPServer("crm")

    @server.tool()
    def send_email(to: str, subject: str) -> dict[str, Any]:
        """Send an email to a customer."""
        CALLED.append(("send_email", {"to": to, "subject": subject}))
        return {"queued": True, "to": to}

    @server.tool()
    def read_inbox(folder: str = "inbox") -> dict[str, Any]:
        """Read the newest messages of a folder."""
        CALLED.append(("read_inbox", {"folder": folder}))
        return {"messages": ["Welcome!"]}

    @server.tool()
    def calculate(expression: str) -> str:
        """Shadowed by the builtin calculator, which registers first."""
        CALLED.append(("calculate", {"expression": expression}))
        return "from mcp"

    return server


@pytest.fixture(scope="module")
def crm_url() -> Iterator[str]:
    with serving(crm_server()) as url:
        yield url


@pytest.fixture(autouse=True)
def _forget_calls() -> None:
    CALLED.clear()


def llm_agent(
    script: list[dict[str, Any]],
    tools: dict[str, Any],
    *,
    tool_approvals: dict[str, Any] | None = None,
    extra_tasks: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": "sources-bot",
        "workflows": [
            {
                "id": "main",
                "tasks": [
                    {
                        "id": "assistant",
                        "type": "llm",
                        "provider": {"type": "scripted", "script": script},
                        "systemMessage": "You help.",
                        "tools": tools,
                        "maxToolIterations": 6,
                    },
                    *(extra_tasks or []),
                ],
            }
        ],
    }
    if tool_approvals is not None:
        document["hitlConfig"] = {"toolApprovals": tool_approvals}
    return document


def when_input(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    return {"when": {"inputContains": text}, "toolCalls": list(calls)}


def results_of(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(snapshot["output"][-1].removeprefix("Done: "))


def crm_agent(crm_url: str) -> dict[str, Any]:
    script = [
        AFTER_TOOLS,
        when_input(
            "email",
            {"id": "mail-1", "name": "send_email", "arguments": {"to": "bob@example.com", "subject": "Hi"}},
        ),
        when_input("inbox", {"id": "read-1", "name": "read_inbox", "arguments": {"folder": "inbox"}}),
        when_input("calculate", {"id": "calc-1", "name": "calculate", "arguments": {"expression": "2 + 3"}}),
        {"reply": "How can I help?"},
    ]
    return llm_agent(
        script,
        {"mcp": [{"name": "crm", "url": crm_url}], "builtin": ["calculate"]},
        tool_approvals={"requireApproval": ["mcp:*"], "exempt": ["mcp:read_*"]},
    )


def test_a_gated_mcp_tool_runs_only_after_approval_and_exactly_once(alice_client, approver_client, crm_url):
    conversation_id = start(alice_client, deployed_agent(crm_agent(crm_url)))
    paused = say(alice_client, conversation_id, "send an email to bob").json()
    assert paused["state"] == "AWAITING_HUMAN"
    assert CALLED == []

    details = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["pauseDetails"]
    (call,) = details["calls"]
    assert (call["callId"], call["toolName"], call["source"], call["gateReason"]) == (
        "mail-1",
        "send_email",
        "mcp",
        "mcp:*",
    )
    assert (call["requestPinned"], call["requestPreview"]) == (False, None)  # nothing to pin outside http

    approved = approver_client.post(
        f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json"
    )
    assert approved.status_code == 200, approved.content
    run_queued_tasks()
    assert CALLED == [("send_email", {"to": "bob@example.com", "subject": "Hi"})]
    snapshot = alice_client.get(f"/agents/{conversation_id}").json()
    assert snapshot["state"] == "READY"
    assert results_of(snapshot) == [
        {"name": "send_email", "status": "OK", "result": {"queued": True, "to": "bob@example.com"}}
    ]


def test_exempt_beats_require_a_read_tool_runs_without_pausing(alice_client, crm_url):
    conversation_id = start(alice_client, deployed_agent(crm_agent(crm_url)))
    snapshot = say(alice_client, conversation_id, "show my inbox").json()
    assert snapshot["state"] == "READY"
    assert CALLED == [("read_inbox", {"folder": "inbox"})]
    assert results_of(snapshot)[0]["result"] == {"messages": ["Welcome!"]}
    assert not Pause.objects.filter(subject_id=conversation_id).exists()


def test_an_ungated_builtin_runs_and_shadows_the_mcp_tool_of_the_same_name(alice_client, crm_url):
    conversation_id = start(alice_client, deployed_agent(crm_agent(crm_url)))
    snapshot = say(alice_client, conversation_id, "calculate 2 + 3").json()
    assert snapshot["state"] == "READY"  # the builtin source is not covered by mcp:*
    assert results_of(snapshot) == [
        {"name": "calculate", "status": "OK", "result": {"expression": "2 + 3", "result": 5}}
    ]
    assert CALLED == []  # the MCP server's calculate was never asked


def test_memory_tools_remember_a_fact_that_a_later_turn_lists(alice_client):
    script = [
        AFTER_TOOLS,
        when_input(
            "remember",
            {"id": "m1", "name": "rememberFact", "arguments": {"key": "language", "value": "Dutch"}},
        ),
        when_input("know", {"id": "m2", "name": "listFacts", "arguments": {}}),
    ]
    conversation_id = start(alice_client, deployed_agent(llm_agent(script, {"memory": True})))
    first = say(alice_client, conversation_id, "remember that I speak Dutch").json()
    assert results_of(first)[0]["result"] == {"remembered": "language", "value": "Dutch"}
    second = say(alice_client, conversation_id, "what do you know about me?").json()
    assert results_of(second) == [
        {"name": "listFacts", "status": "OK", "result": {"facts": {"language": "Dutch"}}}
    ]


def test_recall_finds_an_earlier_turn_of_the_conversation(alice_client):
    script = [
        AFTER_TOOLS,
        when_input("search", {"id": "r1", "name": "searchConversation", "arguments": {"query": "4711"}}),
        {"reply": "Noted."},
    ]
    conversation_id = start(alice_client, deployed_agent(llm_agent(script, {"recall": True})))
    say(alice_client, conversation_id, "my order number is 4711")
    say(alice_client, conversation_id, "something else")
    snapshot = say(alice_client, conversation_id, "search for my order").json()
    (result,) = results_of(snapshot)
    assert result["name"] == "searchConversation"
    assert [(m["input"], m["output"]) for m in result["result"]["matches"]] == [
        ("my order number is 4711", ["Noted."])
    ]


def test_an_a2a_tool_reports_a_paused_nested_agent_and_leaves_its_approval_pending(
    alice_client, approver_client
):
    nested_agent = deployed_agent(account_bot())
    script = [
        AFTER_TOOLS,
        when_input(
            "delete",
            {"id": "a2a-1", "name": "accountBot", "arguments": {"message": "please delete my account"}},
        ),
    ]
    tools = {"a2a": [{"name": "accountBot", "agentId": nested_agent, "description": "Manages accounts"}]}
    conversation_id = start(alice_client, deployed_agent(llm_agent(script, tools)))
    snapshot = say(alice_client, conversation_id, "delete my account please").json()
    assert snapshot["state"] == "READY"  # the calling turn is not stuck behind the nested approval

    (result,) = results_of(snapshot)
    assert result["name"] == "accountBot" and result["status"] == "PAUSED_FOR_APPROVAL"
    paused = result["result"]
    nested_id = paused["conversationId"]
    assert nested_id != conversation_id
    assert paused["suggestNextTool"] == "resume_conversation"
    assert paused["reason"] == "Account deletion requires manager sign-off"
    assert paused["conversationState"] == "AWAITING_HUMAN"

    nested = Conversation.objects.get(pk=nested_id)
    assert str(nested.agent_id) == nested_agent and nested.owner.username == "alice"
    assert nested.state == "AWAITING_HUMAN"
    pause = Pause.objects.get(subject_id=nested_id)
    assert pause.status == PauseStatus.PENDING
    inbox = approver_client.get("/agents/pending-approvals").json()
    assert [row["pauseId"] for row in inbox if row["conversationId"] == nested_id] == [str(pause.id)]


def test_on_a_name_collision_the_builtin_wins_over_the_http_tool(alice_client, loopback_server):
    script = [
        AFTER_TOOLS,
        when_input("calculate", {"id": "c1", "name": "calculate", "arguments": {"expression": "6 * 7"}}),
    ]
    remote_calculator = {
        "id": "remote",
        "type": "httpcalls",
        "targetServerUrl": loopback_server.url,
        "calls": [
            {
                "name": "calculate",
                "description": "A remote calculator",
                "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
                "request": {
                    "method": "POST",
                    "path": "/calculate",
                    "body": {"expression": "{args.expression}"},
                },
            }
        ],
    }
    document = llm_agent(
        script,
        {"builtin": ["calculate"], "http": ["remote"]},
        tool_approvals={"requireApproval": ["http:*"]},
        extra_tasks=[remote_calculator],
    )
    conversation_id = start(alice_client, deployed_agent(document))
    snapshot = say(alice_client, conversation_id, "calculate 6 * 7").json()
    assert snapshot["state"] == "READY"  # the http tool would have been gated by http:*
    assert results_of(snapshot)[0]["result"] == {"expression": "6 * 7", "result": 42}
    assert loopback_server.received == []
