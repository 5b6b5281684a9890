"""How a declared call that fails is reported, the same for a rule-fired call (conversations.pipeline.httpcalls_task)
and an http tool (toolgate.runtime.sources.http): both go through toolgate.outbound.http_calls, against a real loopback server.

Before the two shared one sender, a failure http_requests does not name (here: a response nested too deeply
to parse) was an error result for a rule-fired call, while an http tool let it escape to the tool runner.
"""

from __future__ import annotations

from typing import Any

import pytest

from conversations.pipeline import httpcalls_task
from conversations.pipeline.conversation_memory import Caller, ConversationMemory, Step
from conversations.pipeline.registry import TurnContext
from tests.conversations.conftest import LoopbackServer
from toolgate.gate.tools import Tool, ToolCall, ToolContext, build_toolset
from toolgate.runtime.execution import run_call
from toolgate.runtime.sources import http_tools

TOKEN = "s3cret-env-value"
CALLER_TOKEN = "caller-tok-123"
TOO_DEEP = "[" * 100_000 + "]" * 100_000  # valid JSON that json.loads cannot parse (RecursionError)


@pytest.fixture
def env_token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("HITL_TEST_FAILURE_TOKEN", TOKEN)
    return TOKEN


def task_with(server: LoopbackServer, headers: dict[str, str] | None = None) -> dict[str, Any]:
    call = {
        "name": "lookup",
        "actions": ["look_up"],
        "parameters": {"type": "object", "properties": {"note": {"type": "string"}}},
        "request": {"method": "GET", "path": "/lookup", "headers": headers or {}},
    }
    return {"id": "lookups", "type": "httpcalls", "targetServerUrl": server.url, "calls": [call]}


def rule_fired_result(task: dict[str, Any], note: str = "") -> dict[str, Any]:
    memory = ConversationMemory(
        "c1",
        current=Step(input="look it up", actions=["look_up"]),
        properties={"note": note},
        caller=Caller("alice", given_token=CALLER_TOKEN),
    )
    httpcalls_task.run(task, memory, TurnContext({}, "c1"))  # returns: a failed call never fails the turn
    return memory.current.outputs["lookup"]


def tool_result(task: dict[str, Any], note: str = "") -> Any:
    toolset = build_toolset({"http": http_tools(task)})
    context = ToolContext(
        conversation_id="c1", caller_token=CALLER_TOKEN, template_data={"properties": {"note": note}}
    )
    return run_call(ToolCall(id="call-1", name="lookup", arguments='{"note": ""}'), toolset, context)


def test_a_failure_the_sender_does_not_name_is_the_same_error_result_for_a_rule_fired_call_and_a_tool(
    loopback_server: LoopbackServer,
) -> None:
    loopback_server.respond("/lookup", text=TOO_DEEP)
    task = task_with(loopback_server)

    assert rule_fired_result(task) == {"error": "the call failed: RecursionError"}
    assert tool_result(task) == {"error": "the call failed: RecursionError"}
    assert [request.path for request in loopback_server.received] == ["/lookup", "/lookup"]


@pytest.mark.parametrize(
    "header",
    ["Bearer ${env:HITL_TEST_FAILURE_TOKEN} {properties.note}", "Bearer ${caller:token} {properties.note}"],
)
def test_a_request_httpx_refuses_to_send_is_reported_without_the_secret_it_holds(
    loopback_server: LoopbackServer,
    env_token: str,
    header: str,
) -> None:
    # a line break in a header value: h11 refuses the request, and its message quotes the whole value
    task = task_with(loopback_server, {"Authorization": header})

    for result in (rule_fired_result(task, note="a\r\nb"), tool_result(task, note="a\r\nb")):
        assert result == {"error": "LocalProtocolError: the request is malformed (its value is not shown)"}
        assert env_token not in str(result) and CALLER_TOKEN not in str(result)
    assert loopback_server.received == []


def test_a_failing_tool_of_any_source_reports_its_error_without_the_credential_it_quotes() -> None:
    key = "sk-" + "a1b2c3d4e5" * 3

    def fails(arguments: dict[str, Any], context: ToolContext) -> Any:
        raise RuntimeError(f"upstream refused: Authorization: Bearer {key} (try again later)")

    failing = Tool(name="crm_lookup", source="mcp", description="", parameters={"type": "object"}, run=fails)
    result = run_call(
        ToolCall(id="call-1", name="crm_lookup", arguments="{}"),
        build_toolset({"mcp": [failing]}),
        ToolContext(conversation_id="c1"),
    )

    assert result["status"] == "ERROR" and result["error"].startswith("RuntimeError: upstream refused")
    assert key not in result["error"] and "<REDACTED>" in result["error"]
