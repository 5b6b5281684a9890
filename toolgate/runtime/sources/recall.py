"""Recall tool (source ``recall``): search the earlier turns of this conversation.

``searchConversation(query, limit)`` goes through the ToolContext callable ``search_history(query,
limit)``; ``limit`` defaults to 5 and is clamped to 1..20.
"""

from __future__ import annotations

from typing import Any

from toolgate.gate.tools import Tool, ToolContext

DEFAULT_LIMIT = 5
MAX_LIMIT = 20


def _search(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return {"error": "'query' must be a non-empty string"}
    if ctx.search_history is None:
        return {"error": "the conversation's history cannot be searched here"}
    limit = args.get("limit", DEFAULT_LIMIT)
    if not isinstance(limit, int) or isinstance(limit, bool):
        limit = DEFAULT_LIMIT
    return {"matches": ctx.search_history(query, max(1, min(MAX_LIMIT, limit)))}


def recall_tools() -> list[Tool]:
    return [
        Tool(
            name="searchConversation",
            source="recall",
            description="Search the earlier turns of this conversation for a text.",
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words to look for"},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_LIMIT,
                        "default": DEFAULT_LIMIT,
                    },
                },
                "required": ["query"],
            },
            run=_search,
        )
    ]
