"""The tools an ``llm`` task offers, from its ``tools`` object (one module per source; ``memory`` is ``facts``).

``task["tools"]``::

    {"builtin": ["getCurrentDateTime", "calculate"], "http": ["<httpcalls task id>"],
     "mcp": [{"name", "url"}], "a2a": [{"name", "agentId", "description"}],
     "dynamic": true, "memory": true, "recall": true}

``http`` names ``httpcalls`` tasks of the same agent document (any workflow): their calls with
``parameters`` and the operations of their ``openapi`` document become tools. When two sources offer
the same name the first registrant wins: builtin > http > mcp > a2a > dynamic > memory > recall.
"""

from __future__ import annotations

from typing import Any

from toolgate.gate.tools import Tool, ToolSet, build_toolset
from toolgate.runtime.sources.agents import a2a_tools, dynamic_tools
from toolgate.runtime.sources.builtin import BUILTIN_TOOL_NAMES, builtin_tools
from toolgate.runtime.sources.facts import memory_tools
from toolgate.runtime.sources.http import http_tools, openapi_tools
from toolgate.runtime.sources.mcp import mcp_tools
from toolgate.runtime.sources.recall import recall_tools

TOOLS_KEYS = ("builtin", "http", "mcp", "a2a", "dynamic", "memory", "recall")

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "TOOLS_KEYS",
    "a2a_tools",
    "builtin_tools",
    "dynamic_tools",
    "http_tools",
    "httpcalls_tasks",
    "mcp_tools",
    "memory_tools",
    "openapi_tools",
    "recall_tools",
    "toolset_for",
]


def toolset_for(task: dict[str, Any], document: dict[str, Any]) -> ToolSet:
    """The tool set of the ``llm`` ``task`` of ``document`` (MCP servers are asked for their tools now)."""
    config = task.get("tools") if isinstance(task.get("tools"), dict) else {}
    declared = httpcalls_tasks(document)
    http: list[Tool] = []
    for task_id in _entries(config.get("http")):
        if isinstance(task_id, str) and task_id in declared:
            http += http_tools(declared[task_id]) + openapi_tools(declared[task_id])
    return build_toolset(
        {
            "builtin": builtin_tools(_entries(config.get("builtin"))),
            "http": http,
            "mcp": mcp_tools(_entries(config.get("mcp"))),
            "a2a": a2a_tools(_entries(config.get("a2a"))),
            "dynamic": dynamic_tools() if config.get("dynamic") is True else [],
            "memory": memory_tools() if config.get("memory") is True else [],
            "recall": recall_tools() if config.get("recall") is True else [],
        }
    )


def httpcalls_tasks(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``httpcalls`` tasks of ``document`` by id, across all workflows (the first of an id wins)."""
    found: dict[str, dict[str, Any]] = {}
    for workflow in document.get("workflows") or []:
        for task in (workflow.get("tasks") or []) if isinstance(workflow, dict) else []:
            if isinstance(task, dict) and task.get("type") == "httpcalls" and isinstance(task.get("id"), str):
                found.setdefault(task["id"], task)
    return found


def _entries(value: Any) -> list[Any]:
    """A list setting as a list; anything else (a document that skipped validation) as none."""
    return value if isinstance(value, list) else []
