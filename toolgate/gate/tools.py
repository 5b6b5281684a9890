"""Tools as the LLM tool loop sees them, whatever their source.

A tool has a name (what the model calls), a source tag (for approval patterns such as ``mcp:*``), a
JSON-schema of its arguments, and ``run``. An http tool also knows its endpoint (``post:/path``, for
patterns such as ``http.post:/path``) and how to build its request without sending it (pinning).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SOURCES = ("builtin", "http", "mcp", "a2a", "dynamic", "memory", "recall")
# When two sources offer a tool of the same name, the first registrant wins in this order.
SOURCE_PRECEDENCE = ("builtin", "http", "mcp", "a2a", "dynamic", "memory", "recall")


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for; ``arguments`` is the raw JSON text the model produced."""

    id: str
    name: str
    arguments: str = "{}"


@dataclass
class ToolContext:
    """What a tool may need from the conversation, as callables (toolgate never imports conversations)."""

    conversation_id: str
    agent_id: str = ""
    environment: str = "production"
    caller_username: str = ""
    caller_token: str = ""
    template_data: dict[str, Any] = field(default_factory=dict)
    # http calls with property instructions: write a property (name, value, scope "conversation" | "step")
    set_property: Callable[[str, Any, str], None] | None = None
    # memory tools: read and write facts about the user (conversation properties)
    remember: Callable[[str, Any], None] | None = None
    forget: Callable[[str], bool] | None = None
    recall_facts: Callable[[], dict[str, Any]] | None = None
    # recall: search the conversation's earlier turns
    search_history: Callable[[str, int], list[dict[str, Any]]] | None = None
    # a2a/dynamic: talk to another deployed agent in a nested conversation (registered by conversations)
    talk_to_agent: Callable[..., dict[str, Any]] | None = None
    # raises when a cancel of the running turn was recorded: asked before every model call and tool run
    check_cancelled: Callable[[], None] | None = None
    # http tools: a refusal result for a request about to be sent, else None (set per call by the loop:
    # the gate's judgement of an ungated call, the pinned request of an approved one)
    check_request: Callable[[Any], dict[str, Any] | None] | None = None

    def stop_if_cancelled(self) -> None:
        if self.check_cancelled is not None:
            self.check_cancelled()


@dataclass
class Tool:
    name: str
    source: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any], ToolContext], Any]
    # http tools only: "post:/accounts/{id}" (method lower-case, path as declared, leading slash)
    endpoint: str | None = None
    # http tools only: build the request exactly as run() would, without sending it
    resolve: Callable[[dict[str, Any], ToolContext], Any] | None = None
    # http tools only: why this call can never be pinned (None when it can)
    unpinnable_reason: str | None = None

    def schema_for_model(self) -> dict[str, Any]:
        """The OpenAI Chat Completions ``tools`` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class ToolNotFound(LookupError):
    pass


@dataclass
class ToolSet:
    """The tools offered to one LLM task; the first registrant of a name wins."""

    tools: dict[str, Tool] = field(default_factory=dict)
    shadowed: list[tuple[str, str]] = field(default_factory=list)

    def add(self, tool: Tool) -> None:
        if tool.name in self.tools:
            self.shadowed.append((tool.name, tool.source))
            return
        self.tools[tool.name] = tool

    def get(self, name: str) -> Tool:
        try:
            return self.tools[name]
        except KeyError:
            raise ToolNotFound(name) from None

    def source_of(self, name: str) -> str:
        tool = self.tools.get(name)
        return tool.source if tool else "unknown"

    def endpoint_of(self, name: str) -> str | None:
        tool = self.tools.get(name)
        return tool.endpoint if tool else None

    def for_model(self) -> list[dict[str, Any]]:
        return [tool.schema_for_model() for tool in self.tools.values()]


def build_toolset(tools_by_source: dict[str, list[Tool]]) -> ToolSet:
    """Register tools source by source in precedence order: builtin > http > mcp > a2a > …"""
    toolset = ToolSet()
    for source in SOURCE_PRECEDENCE:
        for tool in tools_by_source.get(source, []):
            toolset.add(tool)
    return toolset
