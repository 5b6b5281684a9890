"""Memory tools (source ``memory``): remember, forget and list facts about the user.

The facts live in the conversation (its properties); the tools reach them through the ToolContext
callables ``remember``, ``forget`` and ``recall_facts``. Without them a tool answers ``{"error"}``.
"""

from __future__ import annotations

from typing import Any

from toolgate.gate.tools import Tool, ToolContext

UNAVAILABLE = {"error": "facts cannot be stored in this conversation"}


def _remember(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    key = args.get("key")
    if not isinstance(key, str) or not key.strip():
        return {"error": "'key' must be a non-empty string"}
    if ctx.remember is None:
        return UNAVAILABLE
    ctx.remember(key, args.get("value"))
    return {"remembered": key, "value": args.get("value")}


def _forget(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    key = args.get("key")
    if not isinstance(key, str) or not key.strip():
        return {"error": "'key' must be a non-empty string"}
    if ctx.forget is None:
        return UNAVAILABLE
    return {"forgotten": key, "existed": bool(ctx.forget(key))}


def _list(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    if ctx.recall_facts is None:
        return UNAVAILABLE
    return {"facts": ctx.recall_facts()}


def memory_tools() -> list[Tool]:
    key = {"type": "string", "description": "A short name for the fact, e.g. preferredLanguage"}
    return [
        Tool(
            name="rememberFact",
            source="memory",
            description="Remember a fact about the user for the rest of the conversation.",
            parameters={
                "type": "object",
                "properties": {"key": key, "value": {"description": "The fact (any JSON value)"}},
                "required": ["key", "value"],
            },
            run=_remember,
        ),
        Tool(
            name="forgetFact",
            source="memory",
            description="Forget a fact about the user.",
            parameters={"type": "object", "properties": {"key": key}, "required": ["key"]},
            run=_forget,
        ),
        Tool(
            name="listFacts",
            source="memory",
            description="List the facts remembered about the user.",
            parameters={"type": "object", "properties": {}, "required": []},
            run=_list,
        ),
    ]
