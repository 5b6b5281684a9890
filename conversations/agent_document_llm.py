"""Save-time checks of the ``llm`` task: its provider, its tools and what they reference."""

from __future__ import annotations

import re

from common.edit_distance import near_miss
from conversations.document_fields import (
    DocumentReport,
    check_target_url,
    child,
    expect_boolean,
    expect_choice,
    expect_list,
    expect_object,
    expect_objects,
    expect_string,
    expect_string_list,
)
from toolgate.gate import validate_tool_approvals
from toolgate.runtime import BUILTIN_TOOL_NAMES, TOOLS_KEYS

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
LLM_PROVIDERS = ("openai", "scripted")
SCRIPT_WHEN_KEYS = ("inputContains", "afterToolResults")
MAX_TOOL_ITERATIONS = 50


def check_llm(report: DocumentReport, task: dict, path: str) -> None:
    """The llm task; its ``toolApprovals`` block is checked like the agent's (toolgate.gate.approval_config)."""
    _check_provider(report, task.get("provider"), child(path, "provider"))
    expect_string(report, task.get("systemMessage"), child(path, "systemMessage"), required=False)
    _check_tools(report, task.get("tools"), child(path, "tools"))
    approvals_path = child(path, "toolApprovals")
    approvals = expect_object(report, task.get("toolApprovals"), approvals_path, required=False)
    if approvals is not None:
        report.errors.extend(validate_tool_approvals(approvals, approvals_path))
    history = task.get("conversationHistoryLimit")
    if history is not None and (
        isinstance(history, bool) or not isinstance(history, int) or not 0 <= history <= 100
    ):
        report.error(
            child(path, "conversationHistoryLimit"), f"must be an integer between 0 and 100, got {history!r}"
        )
    iterations = task.get("maxToolIterations")
    if iterations is not None and (
        isinstance(iterations, bool)
        or not isinstance(iterations, int)
        or not 1 <= iterations <= MAX_TOOL_ITERATIONS
    ):
        report.error(
            child(path, "maxToolIterations"),
            f"must be an integer between 1 and {MAX_TOOL_ITERATIONS}, got {iterations!r}",
        )


def _check_tools(report: DocumentReport, value: object, path: str) -> None:
    """The shape of the ``tools`` object; that ``http`` names httpcalls tasks is checked per document
    (``check_llm_tool_references``)."""
    tools = expect_object(report, value, path, required=False)
    if tools is None:
        return
    for key in tools:
        if key not in TOOLS_KEYS:
            hint = near_miss(key, TOOLS_KEYS)
            report.error(
                child(path, key),
                f"'{key}' is not a tool source"
                + (f" — did you mean '{hint}'?" if hint else "")
                + f" (known: {', '.join(TOOLS_KEYS)})",
            )
    builtin_path = child(path, "builtin")
    for index, value in enumerate(
        expect_list(report, tools.get("builtin"), builtin_path, required=False) or []
    ):
        name = expect_string(report, value, child(builtin_path, index), non_empty=True)
        if name is not None and name not in BUILTIN_TOOL_NAMES:
            report.error(
                child(builtin_path, index),
                f"unknown builtin tool '{name}' (known: {', '.join(BUILTIN_TOOL_NAMES)})",
            )
    expect_string_list(report, tools.get("http"), child(path, "http"), required=False)
    mcp_path = child(path, "mcp")
    for server, server_path in expect_objects(report, tools.get("mcp"), mcp_path, required=False):
        expect_string(report, server.get("name"), child(server_path, "name"), non_empty=True)
        check_target_url(report, server.get("url"), child(server_path, "url"))
    a2a_path = child(path, "a2a")
    for target, target_path in expect_objects(report, tools.get("a2a"), a2a_path, required=False):
        expect_string(
            report, target.get("name"), child(target_path, "name"), non_empty=True, pattern=TOOL_NAME
        )
        expect_string(report, target.get("agentId"), child(target_path, "agentId"), non_empty=True)
        expect_string(report, target.get("description"), child(target_path, "description"), required=False)
    for flag in ("dynamic", "memory", "recall"):
        expect_boolean(report, tools.get(flag), child(path, flag))


def check_llm_tool_references(report: DocumentReport, doc: dict) -> None:
    """Every ``tools.http`` entry of an llm task names an httpcalls task of the same document; one that
    offers no tool (no call declares ``parameters`` and it has no ``openapi``) is warned about."""
    workflows = doc.get("workflows") if isinstance(doc.get("workflows"), list) else []
    located = [
        (child(child(child("workflows", w_index), "tasks"), t_index), task)
        for w_index, workflow in enumerate(workflows)
        if isinstance(workflow, dict) and isinstance(workflow.get("tasks"), list)
        for t_index, task in enumerate(workflow["tasks"])
        if isinstance(task, dict)
    ]
    httpcalls = {
        task["id"]: task
        for _, task in located
        if task.get("type") == "httpcalls" and isinstance(task.get("id"), str)
    }
    for path, task in located:
        tools = task.get("tools")
        if (
            task.get("type") != "llm"
            or not isinstance(tools, dict)
            or not isinstance(tools.get("http"), list)
        ):
            continue
        for index, task_id in enumerate(tools["http"]):
            if not isinstance(task_id, str):
                continue
            entry_path = child(child(child(path, "tools"), "http"), index)
            target = httpcalls.get(task_id)
            if target is None:
                hint = near_miss(task_id, httpcalls)
                report.error(
                    entry_path,
                    f"'{task_id}' is not the id of an httpcalls task of this agent"
                    + (f" — did you mean '{hint}'?" if hint else "")
                    + f" (httpcalls tasks: {', '.join(httpcalls) or 'none'})",
                )
            elif not target.get("openapi") and not any(
                isinstance(call, dict) and isinstance(call.get("parameters"), dict)
                for call in target.get("calls") or []
            ):
                report.warn(
                    entry_path,
                    f"httpcalls task '{task_id}' offers no tool: none of its calls declares 'parameters'",
                )


def _check_provider(report: DocumentReport, value: object, path: str) -> None:
    provider = expect_object(report, value, path)
    if provider is None:
        return
    kind = expect_choice(report, provider.get("type"), child(path, "type"), LLM_PROVIDERS)
    if kind == "openai":
        expect_string(report, provider.get("model"), child(path, "model"), non_empty=True)
        expect_string(report, provider.get("baseUrl"), child(path, "baseUrl"), required=False)
        api_key = expect_string(report, provider.get("apiKey"), child(path, "apiKey"), required=False)
        if isinstance(api_key, str) and api_key and not api_key.strip().startswith("${"):
            report.warn(
                child(path, "apiKey"),
                "a literal API key is stored in the agent document: use a "
                "${vault:NAME} or ${env:NAME} reference instead (documents are readable by their users)",
            )
    elif kind == "scripted":
        for entry, entry_path in expect_objects(report, provider.get("script"), child(path, "script")):
            _check_script_entry(report, entry, entry_path)


def _check_script_entry(report: DocumentReport, entry: dict, path: str) -> None:
    has_reply, has_calls = entry.get("reply") is not None, entry.get("toolCalls") is not None
    if has_reply == has_calls:
        report.error(path, "needs exactly one of 'reply' or 'toolCalls'")
    expect_string(report, entry.get("reply"), child(path, "reply"), required=False)
    for call, call_path in expect_objects(
        report, entry.get("toolCalls"), child(path, "toolCalls"), required=False
    ):
        expect_string(report, call.get("id"), child(call_path, "id"), required=False)
        expect_string(report, call.get("name"), child(call_path, "name"), non_empty=True)
        expect_object(report, call.get("arguments"), child(call_path, "arguments"), required=False)
    when = expect_object(report, entry.get("when"), child(path, "when"), required=False)
    if when is not None:
        for key in when:
            if key not in SCRIPT_WHEN_KEYS:
                # a misspelt condition would make the entry answer every call
                report.error(
                    child(child(path, "when"), key), f"'{key}' must be one of {', '.join(SCRIPT_WHEN_KEYS)}"
                )
        expect_string(
            report, when.get("inputContains"), child(child(path, "when"), "inputContains"), required=False
        )
        expect_boolean(report, when.get("afterToolResults"), child(child(path, "when"), "afterToolResults"))
