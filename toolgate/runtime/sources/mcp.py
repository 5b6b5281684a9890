"""MCP tools (source ``mcp``): the tools of external MCP servers, through the official ``mcp`` client.

Each server is ``{"name", "url"}`` (streamable HTTP). Its tools are listed when the tool set is built
(name, description, input schema); a server that cannot be reached or listed is logged and offers no
tools, so one broken server does not break the turn. ``run`` opens a session and calls the tool:
the result is the tool's structured content when it has any, else its text content joined with
newlines; a result the server flags as an error is ``{"error": <text>}``, and so is a call that fails.

The client is async; these tools are called from synchronous code. Each operation runs on a fresh
event loop, in a worker thread when the calling thread already runs one. Every operation is bounded by
``HITL_HTTP_TIMEOUT_SECONDS``. A server's URL is set by whoever writes the agent document (an admin), not by
the model, so the egress guard of declared calls (toolgate.outbound.egress) does not apply to it: an MCP server on
an internal network is an ordinary, operator-configured target.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from toolgate.gate.tools import Tool, ToolContext

logger = logging.getLogger(__name__)

MAX_LIST_PAGES = 50
T = TypeVar("T")


def mcp_tools(servers: list[dict[str, Any]]) -> list[Tool]:
    """The tools of every server in ``servers``, server by server in the order listed by each."""
    tools: list[Tool] = []
    for server in (entry for entry in servers if isinstance(entry, dict)):
        url, server_name = str(server.get("url") or ""), str(server.get("name") or "")
        try:
            listed = run_sync(lambda url=url: _list_tools(url))
        except Exception as error:  # an unreachable server offers no tools; the turn goes on
            logger.warning("MCP server %r (%s) offers no tools: %s", server_name, url, _describe(error))
            continue
        tools.extend(_tool(url, server_name, item) for item in listed)
    return tools


def _tool(url: str, server_name: str, listed: Any) -> Tool:
    name = str(listed.name)

    def run(args: dict[str, Any], ctx: ToolContext) -> Any:
        try:
            return run_sync(lambda: _call_tool(url, name, args))
        except Exception as error:
            return {"error": f"MCP server {server_name!r}: {_describe(error)}"}

    return Tool(
        name=name,
        source="mcp",
        description=str(listed.description or ""),
        parameters=dict(listed.input_schema or {"type": "object", "properties": {}}),
        run=run,
    )


async def _list_tools(url: str) -> list[Any]:
    from mcp import Client  # imported when used: the client pulls in a large dependency tree

    listed: list[Any] = []
    async with Client(url) as client:
        cursor = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
    return listed


async def _call_tool(url: str, name: str, args: dict[str, Any]) -> Any:
    from mcp import Client

    async with Client(url) as client:
        result = await client.call_tool(name, args)
    text = "\n".join(
        block.text
        if getattr(block, "type", None) == "text"
        else f"[{getattr(block, 'type', 'unknown')} content]"
        for block in result.content
    )
    if result.is_error:
        return {"error": text or "the tool reported an error"}
    return result.structured_content if result.structured_content is not None else text


def run_sync(operation: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine ``operation()`` to completion from synchronous code, bounded by the timeout."""
    from django.conf import settings

    timeout = float(settings.HITL_HTTP_TIMEOUT_SECONDS)

    async def bounded() -> T:
        return await asyncio.wait_for(operation(), timeout)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(bounded())
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-client") as pool:
        return pool.submit(asyncio.run, bounded()).result()


def _describe(error: BaseException) -> str:
    """A one-line description; task-group errors are unwrapped to their first cause."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, TimeoutError):
        return "timed out"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
