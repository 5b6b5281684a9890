"""MCP tools against a real MCP server (the ``mcp`` package's MCPServer under uvicorn on loopback)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from toolgate.gate.tools import Tool, ToolContext
from toolgate.runtime.sources import mcp_tools, toolset_for

SENT: list[dict[str, Any]] = []


def build_server() -> MCPServer:
    server = MCPServer("crm")

    @server.tool()
    def send_email(to: str, subject: str, body: str = "") -> dict[str, Any]:
        """Send an email to a customer."""
        SENT.append({"to": to, "subject": subject, "body": body})
        return {"queued": True, "to": to}

    @server.tool()
    def motd() -> str:
        """The message of the day."""
        return "Be kind."

    @server.tool(structured_output=False)
    def greeting(name: str) -> str:
        """Unstructured: text content only."""
        return f"Hello, {name}!"

    @server.tool()
    def calculate(expression: str) -> str:
        """A calculator that shadows nothing: the builtin one registers first."""
        return "mcp"

    @server.tool()
    def explode() -> str:
        """Always fails."""
        raise ToolError("the mail relay is down")

    return server


@contextmanager
def serving(server_definition: MCPServer) -> Iterator[str]:
    """``server_definition`` under uvicorn on 127.0.0.1 and a free port; yields its /mcp URL."""
    app = server_definition.streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the MCP server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    with serving(build_server()) as url:
        yield url


@pytest.fixture(autouse=True)
def clear_sent() -> None:
    SENT.clear()


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {tool.name: tool for tool in tools}


CTX = ToolContext(conversation_id="c")


def test_the_servers_tools_are_listed_with_their_schema(mcp_url: str) -> None:
    tools = by_name(mcp_tools([{"name": "crm", "url": mcp_url}]))
    assert set(tools) == {"send_email", "motd", "greeting", "calculate", "explode"}
    send_email = tools["send_email"]
    assert (send_email.source, send_email.description, send_email.endpoint) == (
        "mcp",
        "Send an email to a customer.",
        None,
    )
    assert send_email.parameters["type"] == "object"
    assert set(send_email.parameters["properties"]) == {"to", "subject", "body"}
    assert set(send_email.parameters["required"]) == {"to", "subject"}
    assert send_email.schema_for_model()["function"]["parameters"] == send_email.parameters


def test_running_a_tool_calls_it_on_the_server(mcp_url: str) -> None:
    tools = by_name(mcp_tools([{"name": "crm", "url": mcp_url}]))
    result = tools["send_email"].run({"to": "bob@example.com", "subject": "Hi"}, CTX)
    assert result == {"queued": True, "to": "bob@example.com"}
    assert SENT == [{"to": "bob@example.com", "subject": "Hi", "body": ""}]


def test_an_mcp_server_is_an_operator_configured_target_outside_the_egress_guard(
    mcp_url: str, settings: Any
) -> None:
    """The guard covers declared http calls, whose URLs may carry what the model chose; an MCP server's URL
    is written by an admin in the agent document, so one on loopback works with the guard on."""
    settings.HITL_HTTP_DENY_PRIVATE = True
    settings.HITL_HTTP_ALLOW_PRIVATE = ""

    tools = by_name(mcp_tools([{"name": "crm", "url": mcp_url}]))

    assert tools["send_email"].run({"to": "dan@example.com", "subject": "Hi"}, CTX) == {
        "queued": True,
        "to": "dan@example.com",
    }


def test_structured_content_is_the_result(mcp_url: str) -> None:
    # MCPServer also returns a plain value as structured content, wrapped as {"result": …}
    assert by_name(mcp_tools([{"name": "crm", "url": mcp_url}]))["motd"].run({}, CTX) == {
        "result": "Be kind."
    }


def test_text_content_is_the_result_when_there_is_no_structured_content(mcp_url: str) -> None:
    tool = by_name(mcp_tools([{"name": "crm", "url": mcp_url}]))["greeting"]
    assert tool.run({"name": "Ann"}, CTX) == "Hello, Ann!"


def test_a_tool_error_is_an_error_result(mcp_url: str) -> None:
    result = by_name(mcp_tools([{"name": "crm", "url": mcp_url}]))["explode"].run({}, CTX)
    assert set(result) == {"error"}
    assert "the mail relay is down" in result["error"]


def test_a_tool_runs_from_code_that_already_runs_an_event_loop(mcp_url: str) -> None:
    tool = by_name(mcp_tools([{"name": "crm", "url": mcp_url}]))["send_email"]

    async def inside_a_loop() -> Any:
        return tool.run({"to": "carol@example.com", "subject": "From a loop"}, CTX)

    assert asyncio.run(inside_a_loop()) == {"queued": True, "to": "carol@example.com"}
    assert [email["to"] for email in SENT] == ["carol@example.com"]


def test_an_unreachable_server_offers_no_tools(mcp_url: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="toolgate.runtime.sources.mcp"):
        tools = mcp_tools(
            [{"name": "down", "url": "http://127.0.0.1:9/mcp"}, {"name": "crm", "url": mcp_url}]
        )
    assert "send_email" in by_name(tools)
    assert "MCP server 'down'" in caplog.text


def test_a_server_that_went_away_gives_an_error_result() -> None:
    with serving(build_server()) as url:
        tool = by_name(mcp_tools([{"name": "short-lived", "url": url}]))["send_email"]
    result = tool.run({"to": "dave@example.com", "subject": "Hi"}, CTX)
    assert set(result) == {"error"} and "MCP server 'short-lived'" in result["error"]
    assert SENT == []


def test_builtin_tools_win_over_mcp_tools_of_the_same_name(mcp_url: str) -> None:
    task = {
        "id": "assistant",
        "type": "llm",
        "tools": {
            "mcp": [{"name": "crm", "url": mcp_url}, {"name": "crm-again", "url": mcp_url}],
            "builtin": ["calculate"],
        },
    }
    toolset = toolset_for(task, {"workflows": [{"id": "w", "tasks": [task]}]})
    assert toolset.source_of("calculate") == "builtin"
    assert toolset.get("calculate").run({"expression": "2+2"}, CTX) == {"expression": "2+2", "result": 4}
    assert toolset.source_of("send_email") == "mcp"
    assert ("calculate", "mcp") in toolset.shadowed
    # the second server offers the same names: the first server registered them
    assert toolset.shadowed.count(("send_email", "mcp")) == 1
