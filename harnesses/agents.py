"""Agent documents with an LLM task (scripted model) and gated http tools, for tool-gating tests."""

from __future__ import annotations

import copy
from typing import Any

AFTER_TOOLS = {"when": {"afterToolResults": True}, "reply": "Done: {toolResults}"}


def payments_agent(
    target_url: str,
    *,
    script: list[dict[str, Any]] | None = None,
    tool_approvals: dict[str, Any] | None = None,
    hitl_config: dict[str, Any] | None = None,
    task_approvals: dict[str, Any] | None = None,
    extra_calls: list[dict[str, Any]] | None = None,
    builtin: list[str] | None = None,
) -> dict[str, Any]:
    """An agent whose model calls ``transfer_funds`` (POST /transfers) when asked to transfer."""
    script = (
        script
        if script is not None
        else [
            AFTER_TOOLS,
            {
                "when": {"inputContains": "transfer"},
                "toolCalls": [
                    {"id": "call-1", "name": "transfer_funds", "arguments": {"amount": 100, "to": "bob"}}
                ],
            },
            {"reply": "How can I help?"},
        ]
    )
    llm: dict[str, Any] = {
        "id": "assistant",
        "type": "llm",
        "provider": {"type": "scripted", "script": script},
        "systemMessage": "You help with payments.",
        "tools": {"http": ["payments"], **({"builtin": builtin} if builtin else {})},
        "maxToolIterations": 6,
    }
    if task_approvals is not None:
        llm["toolApprovals"] = task_approvals
    calls = [
        {
            "name": "transfer_funds",
            "description": "Transfer money",
            "parameters": {
                "type": "object",
                "properties": {"amount": {"type": "number"}, "to": {"type": "string"}},
                "required": ["amount", "to"],
            },
            "request": {
                "method": "POST",
                "path": "/transfers",
                "body": {"amount": "{args.amount}", "to": "{args.to}"},
            },
        },
        {
            "name": "get_balance",
            "description": "Read the balance",
            "parameters": {"type": "object", "properties": {}},
            "request": {"method": "GET", "path": "/balance"},
        },
        *(extra_calls or []),
    ]
    config = copy.deepcopy(hitl_config) if hitl_config is not None else {}
    config["toolApprovals"] = (
        tool_approvals if tool_approvals is not None else {"requireApproval": ["transfer_*"]}
    )
    return {
        "name": "payments-bot",
        "workflows": [
            {
                "id": "main",
                "tasks": [
                    llm,
                    {"id": "payments", "type": "httpcalls", "targetServerUrl": target_url, "calls": calls},
                ],
            }
        ],
        "hitlConfig": config,
    }


def http_tool_agent(
    target_url: str,
    calls: list[dict[str, Any]],
    script: list[dict[str, Any]],
    *,
    tool_approvals: dict[str, Any] | None = None,
    target_server_url: str | None = None,
) -> dict[str, Any]:
    """An agent whose scripted model runs ``script`` with the http tools ``calls`` (each a call of one
    httpcalls task on ``target_url``, ``parameters`` defaulted to an open object)."""
    tools = [{"parameters": {"type": "object", "properties": {}}, **call} for call in calls]
    return {
        "name": "tools-bot",
        "workflows": [
            {
                "id": "main",
                "tasks": [
                    {
                        "id": "assistant",
                        "type": "llm",
                        "provider": {"type": "scripted", "script": script},
                        "tools": {"http": ["api"]},
                        "maxToolIterations": 6,
                    },
                    {
                        "id": "api",
                        "type": "httpcalls",
                        "targetServerUrl": target_server_url if target_server_url is not None else target_url,
                        "calls": tools,
                    },
                ],
            }
        ],
        "hitlConfig": {"toolApprovals": tool_approvals or {"requireApproval": ["transfer_*"]}},
    }


def one_call(name: str, arguments: dict[str, Any], call_id: str = "call-1") -> list[dict[str, Any]]:
    """A script: on "go" the model calls ``name`` once, then answers with the tool results."""
    return [
        AFTER_TOOLS,
        {
            "when": {"inputContains": "go"},
            "toolCalls": [{"id": call_id, "name": name, "arguments": arguments}],
        },
        {"reply": "ok"},
    ]
