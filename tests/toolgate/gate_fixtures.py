"""A toolset with one tool of several sources, and calls to it, for the pure gate and rule tests."""

from __future__ import annotations

from toolgate.gate.tools import Tool, ToolCall, ToolSet, build_toolset


def _tool(name: str, source: str, endpoint: str | None = None) -> Tool:
    return Tool(
        name=name,
        source=source,
        description=name,
        parameters={"type": "object", "properties": {}},
        run=lambda arguments, context: {"ran": name},
        endpoint=endpoint,
    )


def toolset() -> ToolSet:
    return build_toolset(
        {
            "builtin": [_tool("calculator", "builtin"), _tool("delete_account", "builtin")],
            "http": [
                _tool("create_agent", "http", "post:/agentstore/agents"),
                _tool("list_agents", "http", "get:/agentstore/agents"),
                _tool("deploy_agent", "http", "post:/administration/{environment}/deploy/{agentId}"),
                _tool("delete_agent", "http", "delete:/agentstore/agents/{id}"),
            ],
            "mcp": [_tool("read_file", "mcp"), _tool("delete_file", "mcp")],
            "memory": [_tool("remember", "memory")],
        }
    )


def call(name: str, call_id: str | None = None) -> ToolCall:
    return ToolCall(id=call_id or f"call-{name}", name=name)


def ids(calls: list[ToolCall]) -> list[str]:
    return [c.id for c in calls]
