"""Tool sources: builtin, http (declared and OpenAPI-generated), memory, recall, a2a/dynamic, and the
tool set an llm task gets (first registrant wins); the save-time checks of the ``tools`` object."""

from __future__ import annotations

import json
from typing import Any

import pytest
import time_machine

from conversations.agent_document_llm import check_llm, check_llm_tool_references
from conversations.document_fields import DocumentReport
from tests.conversations.conftest import LoopbackServer
from toolgate.gate.tools import Tool, ToolContext, build_toolset
from toolgate.outbound.http_requests import BuiltRequest
from toolgate.runtime.sources import (
    a2a_tools,
    builtin_tools,
    dynamic_tools,
    http_tools,
    memory_tools,
    openapi_tools,
    recall_tools,
    toolset_for,
)
from toolgate.runtime.sources.builtin import CalculationError, calculate
from toolgate.runtime.sources.http import unpinnable_reason


def ctx(**callables: Any) -> ToolContext:
    return ToolContext(conversation_id="conv-1", **callables)


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {tool.name: tool for tool in tools}


# --- builtin ----------------------------------------------------------------------------------------


@time_machine.travel("2025-03-04T05:06:07+00:00", tick=False)
def test_get_current_date_time_is_iso_utc() -> None:
    (tool,) = builtin_tools(["getCurrentDateTime"])
    assert (tool.source, tool.endpoint) == ("builtin", None)
    assert tool.run({}, ctx()) == {"dateTime": "2025-03-04T05:06:07Z"}


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("2 ** 10", 1024),
        ("sqrt(16) + abs(-2)", 6.0),
        ("round(2.675 * 100) / 100", 2.68),
        ("max(1, 5, 3) - min(4, 2)", 3),
        ("  +1.5e3 ", 1500.0),
    ],
)
def test_calculate_evaluates_arithmetic(expression: str, value: float) -> None:
    assert calculate(expression) == value


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",
        "().__class__",
        "open('/etc/passwd')",
        "x + 1",
        "'a' * 3",
        "[1, 2]",
        "lambda: 1",
        "9 ** 9 ** 9",
        "10 ** 101",
        "1 / 0",
        "sqrt(-1)",
        "(-8) ** 0.5",
        "True + 1",
        "1 +",
        "1" * 501,
    ],
)
def test_calculate_refuses_anything_but_bounded_arithmetic(expression: str) -> None:
    with pytest.raises(CalculationError):
        calculate(expression)


def test_the_calculate_tool_reports_errors_as_results() -> None:
    tool = by_name(builtin_tools(["calculate"]))["calculate"]
    assert tool.run({"expression": "6 * 7"}, ctx()) == {"expression": "6 * 7", "result": 42}
    assert tool.run({"expression": "1/0"}, ctx()) == {"expression": "1/0", "error": "division by zero"}
    assert "error" in tool.run({}, ctx())


def test_builtin_tools_are_those_named_in_order_and_unknown_names_are_skipped() -> None:
    tools = builtin_tools(["echo", "nope", "calculate"])
    assert [tool.name for tool in tools] == ["echo", "calculate"]
    assert tools[0].run({"text": "hi"}, ctx()) == {"text": "hi"}


# --- http ---------------------------------------------------------------------------------------------


def payments_task(server: LoopbackServer, *calls: dict[str, Any]) -> dict[str, Any]:
    return {"id": "payments", "type": "httpcalls", "targetServerUrl": server.url, "calls": list(calls)}


TRANSFER = {
    "name": "transfer_funds",
    "description": "Transfer money",
    "parameters": {
        "type": "object",
        "properties": {"account": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["account", "amount"],
    },
    "request": {
        "method": "POST",
        "path": "/accounts/{args.account}/transfers",
        "headers": {"Authorization": "Bearer ${caller:token}", "X-User": "{properties.userName}"},
        "queryParams": {"currency": "{args.currency}"},
        "body": {"amount": "{args.amount}", "note": "for {properties.userName}"},
    },
}


def test_calls_with_parameters_become_http_tools_with_their_endpoint(loopback_server: LoopbackServer) -> None:
    fired_only = {"name": "notify", "actions": ["done"], "request": {"method": "POST", "path": "/notify"}}
    balance = {"name": "get_balance", "parameters": {"type": "object"}, "request": {"path": "balance"}}
    tools = http_tools(payments_task(loopback_server, TRANSFER, fired_only, balance))
    assert [(tool.name, tool.source, tool.endpoint) for tool in tools] == [
        ("transfer_funds", "http", "post:/accounts/{args.account}/transfers"),
        ("get_balance", "http", "get:/balance"),
    ]
    assert tools[0].description == "Transfer money"
    assert tools[0].parameters == TRANSFER["parameters"]
    assert tools[1].description == "GET balance"


def test_an_http_tool_sends_the_request_built_from_args_and_template_data(
    loopback_server: LoopbackServer,
) -> None:
    loopback_server.respond("/accounts/a%2F1/transfers", status=201, json_body={"id": "t-9"})
    (tool,) = http_tools(payments_task(loopback_server, TRANSFER))
    context = ToolContext(
        conversation_id="conv-1", caller_token="tok-123", template_data={"properties": {"userName": "alice"}}
    )
    result = tool.run({"account": "a/1", "amount": 12.5, "currency": "EUR"}, context)
    assert result == {"status": 201, "body": {"id": "t-9"}}
    (received,) = loopback_server.received
    assert (received.method, received.path, received.query) == (
        "POST",
        "/accounts/a%2F1/transfers",
        [("currency", "EUR")],
    )
    assert received.headers["authorization"] == "Bearer tok-123"
    assert received.headers["x-user"] == "alice"
    assert received.json() == {"amount": "12.5", "note": "for alice"}


def test_resolve_builds_the_same_request_without_sending_it(loopback_server: LoopbackServer) -> None:
    (tool,) = http_tools(payments_task(loopback_server, TRANSFER))
    context = ToolContext(
        conversation_id="conv-1", caller_token="tok", template_data={"properties": {"userName": "al"}}
    )
    built = tool.resolve({"account": "42", "amount": 3}, context)
    assert loopback_server.received == []
    assert isinstance(built, BuiltRequest)
    assert (built.method, built.url) == ("POST", f"{loopback_server.url}/accounts/42/transfers")
    assert built.headers["Authorization"] == "Bearer tok"
    assert json.loads(built.body) == {"amount": "3", "note": "for al"}
    tool.run({"account": "42", "amount": 3}, context)
    (received,) = loopback_server.received
    assert received.body == built.body and received.path == "/accounts/42/transfers"


def test_args_cannot_smuggle_secret_references(loopback_server: LoopbackServer, monkeypatch) -> None:
    monkeypatch.setenv("HITL_TEST_SECRET", "s3cret")
    (tool,) = http_tools(payments_task(loopback_server, TRANSFER))
    tool.run(
        {"account": "1", "amount": "${env:HITL_TEST_SECRET}"},
        ToolContext(conversation_id="conv-1", caller_token="t"),
    )
    assert loopback_server.received[0].json()["amount"] == "${env:HITL_TEST_SECRET}"


def test_a_call_that_cannot_be_sent_returns_an_error_result() -> None:
    task = {"id": "t", "targetServerUrl": "http://127.0.0.1:9", "calls": [dict(TRANSFER)]}
    (tool,) = http_tools(task)
    assert "error" in tool.run({"account": "1", "amount": 1}, ctx())


def test_a_fire_and_forget_tool_does_not_read_the_body(loopback_server: LoopbackServer) -> None:
    call = {
        "name": "ping",
        "parameters": {"type": "object"},
        "fireAndForget": True,
        "request": {"path": "/ping"},
    }
    (tool,) = http_tools(payments_task(loopback_server, call))
    assert tool.run({}, ctx()) == {"sent": True, "status": 200}
    assert [request.path for request in loopback_server.received] == ["/ping"]


@pytest.mark.parametrize(
    ("extra", "reason_mentions"),
    [
        ({}, None),
        ({"preRequest": {"propertyInstructions": []}}, "propertyInstructions"),
        ({"preRequest": {"batchRequests": {}}}, None),
        ({"fireAndForget": True, "preRequest": {"batchRequests": {}}}, "batchRequests"),
        ({"postResponse": {"retryApiCallInstruction": {}}}, "retryApiCallInstruction"),
        ({"postResponse": {"retryApiCallInstruction": {"maxRetries": 1}}}, "retryApiCallInstruction"),
        ({"postResponse": {"retryApiCallInstruction": {"maxRetries": 0}}}, None),
    ],
)
def test_unpinnable_calls_say_why(extra: dict[str, Any], reason_mentions: str | None) -> None:
    call = {**TRANSFER, **extra}
    reason = unpinnable_reason(call)
    assert (reason is None) == (reason_mentions is None)
    if reason_mentions:
        assert reason_mentions in reason
        (tool,) = http_tools({"targetServerUrl": "http://x", "calls": [call]})
        assert tool.unpinnable_reason == reason


# --- OpenAPI ------------------------------------------------------------------------------------------

PETSTORE = {
    "openapi": "3.0.3",
    "info": {"title": "pets", "version": "1"},
    "servers": [{"url": "http://unused.example"}],
    "paths": {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "summary": "List pets",
                "parameters": [
                    {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                    {"name": "tag", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
                    {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                ],
            },
            "post": {
                "operationId": "createPet",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}},
                },
            },
        },
        "/pets/{petId}": {
            "parameters": [{"$ref": "#/components/parameters/PetId"}],
            "get": {"operationId": "showPet", "description": "One pet"},
            "delete": {"operationId": "deletePet"},
            "put": {"summary": "no operationId: skipped"},
        },
    },
    "components": {
        "parameters": {
            "PetId": {"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}
        },
        "schemas": {
            "NewPet": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "owner": {"$ref": "#/components/schemas/Owner"}},
                "required": ["name"],
            },
            "Owner": {"type": "object", "properties": {"email": {"type": "string"}}},
        },
    },
}


def openapi_task(server: LoopbackServer) -> dict[str, Any]:
    return {"id": "pets", "type": "httpcalls", "targetServerUrl": server.url, "openapi": PETSTORE}


def test_openapi_operations_with_an_operation_id_become_http_tools(loopback_server: LoopbackServer) -> None:
    tools = openapi_tools(openapi_task(loopback_server))
    assert [(tool.name, tool.source, tool.endpoint) for tool in tools] == [
        ("listPets", "http", "get:/pets"),
        ("createPet", "http", "post:/pets"),
        ("showPet", "http", "get:/pets/{petId}"),
        ("deletePet", "http", "delete:/pets/{petId}"),
    ]
    tools_by_name = by_name(tools)
    assert tools_by_name["listPets"].description == "List pets"
    assert tools_by_name["showPet"].description == "One pet"
    assert tools_by_name["deletePet"].description == "DELETE /pets/{petId}"
    assert tools_by_name["listPets"].parameters == {
        "type": "object",
        "properties": {"limit": {"type": "integer"}, "tag": {"type": "array", "items": {"type": "string"}}},
        "required": [],
    }
    assert tools_by_name["showPet"].parameters["required"] == ["petId"]
    assert tools_by_name["createPet"].parameters == {
        "type": "object",
        "properties": {
            "body": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "owner": {"type": "object", "properties": {"email": {"type": "string"}}},
                },
                "required": ["name"],
            }
        },
        "required": ["body"],
    }
    assert all(tool.unpinnable_reason is None and tool.resolve is not None for tool in tools)


def test_openapi_tools_send_through_the_same_builder(loopback_server: LoopbackServer) -> None:
    tools = by_name(openapi_tools(openapi_task(loopback_server)))
    loopback_server.respond("/pets/p%201", json_body={"id": "p 1"})
    assert tools["showPet"].run({"petId": "p 1"}, ctx()) == {"status": 200, "body": {"id": "p 1"}}
    tools["listPets"].run({"limit": 2, "tag": ["a", "b"]}, ctx())
    tools["listPets"].run({}, ctx())
    tools["createPet"].run({"body": {"name": "Rex", "owner": {"email": "a@b"}}}, ctx())
    tools["deletePet"].run({"petId": "7"}, ctx())
    show, listed, listed_bare, created, deleted = loopback_server.received
    assert (show.method, show.path) == ("GET", "/pets/p%201")
    assert listed.query == [("limit", "2"), ("tag", "a"), ("tag", "b")]
    assert listed_bare.query == [] and listed_bare.body == b""
    assert (created.method, created.headers["content-type"]) == ("POST", "application/json")
    assert created.json() == {"name": "Rex", "owner": {"email": "a@b"}}
    assert (deleted.method, deleted.path) == ("DELETE", "/pets/7")


def test_openapi_resolve_matches_what_run_sends(loopback_server: LoopbackServer) -> None:
    tool = by_name(openapi_tools(openapi_task(loopback_server)))["listPets"]
    built = tool.resolve({"tag": ["x"]}, ctx())
    assert built.query == [("tag", "x")] and loopback_server.received == []
    tool.run({"tag": ["x"]}, ctx())
    assert loopback_server.received[0].query == [("tag", "x")]


def test_openapi_target_falls_back_to_the_documents_first_server(loopback_server: LoopbackServer) -> None:
    document = {**PETSTORE, "servers": [{"url": loopback_server.url + "/v1"}]}
    tool = by_name(openapi_tools({"id": "pets", "openapi": document}))["deletePet"]
    tool.run({"petId": "3"}, ctx())
    assert loopback_server.received[0].path == "/v1/pets/3"


def test_a_task_without_openapi_generates_no_tools() -> None:
    assert openapi_tools({"id": "t", "calls": []}) == []


# --- memory, recall, agents ----------------------------------------------------------------------------


def test_memory_tools_remember_forget_and_list_through_the_context() -> None:
    facts: dict[str, Any] = {}
    context = ctx(
        remember=facts.__setitem__,
        forget=lambda key: facts.pop(key, None) is not None,
        recall_facts=lambda: dict(facts),
    )
    tools = by_name(memory_tools())
    assert {tool.source for tool in tools.values()} == {"memory"}
    assert tools["rememberFact"].run({"key": "language", "value": "de"}, context) == {
        "remembered": "language",
        "value": "de",
    }
    assert tools["listFacts"].run({}, context) == {"facts": {"language": "de"}}
    assert tools["forgetFact"].run({"key": "language"}, context) == {"forgotten": "language", "existed": True}
    assert tools["forgetFact"].run({"key": "language"}, context) == {
        "forgotten": "language",
        "existed": False,
    }
    assert facts == {}


def test_memory_tools_without_the_callables_answer_an_error() -> None:
    tools = by_name(memory_tools())
    assert "error" in tools["rememberFact"].run({"key": "a", "value": 1}, ctx())
    assert "error" in tools["rememberFact"].run({"key": " ", "value": 1}, ctx(remember=lambda k, v: None))
    assert "error" in tools["listFacts"].run({}, ctx())


def test_recall_searches_history_through_the_context_with_a_clamped_limit() -> None:
    seen: list[tuple[str, int]] = []

    def search(query: str, limit: int) -> list[dict[str, Any]]:
        seen.append((query, limit))
        return [{"step": 1, "input": "my IBAN is …"}]

    (tool,) = recall_tools()
    assert (tool.name, tool.source) == ("searchConversation", "recall")
    assert tool.run({"query": "IBAN"}, ctx(search_history=search)) == {
        "matches": [{"step": 1, "input": "my IBAN is …"}]
    }
    tool.run({"query": "IBAN", "limit": 500}, ctx(search_history=search))
    tool.run({"query": "IBAN", "limit": 0}, ctx(search_history=search))
    assert seen == [("IBAN", 5), ("IBAN", 20), ("IBAN", 1)]
    assert "error" in tool.run({"query": "IBAN"}, ctx())


PAUSED = {
    "status": "PAUSED_FOR_APPROVAL",
    "conversationId": "nested-1",
    "conversationState": "AWAITING_HUMAN",
    "reason": "Tool call requires approval: transfer_funds",
    "suggestNextTool": "resume_conversation",
    "message": "The payments agent waits for a human approval.",
}


class FakeAgents:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return self.answer


def test_a2a_tools_talk_to_their_target_and_pass_a_pause_through() -> None:
    agents = FakeAgents(PAUSED)
    (tool,) = a2a_tools([{"name": "ask_payments", "agentId": "agent-pay", "description": "Payments agent"}])
    assert (tool.name, tool.source, tool.description) == ("ask_payments", "a2a", "Payments agent")
    assert tool.parameters["required"] == ["message"]
    assert tool.run({"message": "pay bob 5"}, ctx(talk_to_agent=agents)) == PAUSED
    tool.run({"message": "and now?", "conversationId": "nested-1"}, ctx(talk_to_agent=agents))
    assert agents.calls == [
        {"agent_id": "agent-pay", "message": "pay bob 5", "conversation_id": None},
        {"agent_id": "agent-pay", "message": "and now?", "conversation_id": "nested-1"},
    ]


def test_dynamic_tools_start_and_continue_agent_conversations() -> None:
    agents = FakeAgents(
        {"status": "OK", "conversationId": "n-2", "conversationState": "READY", "output": ["hi"]}
    )
    tools = by_name(dynamic_tools())
    assert {tool.source for tool in tools.values()} == {"dynamic"}
    context = ctx(talk_to_agent=agents)
    assert (
        tools["talkToAgent"].run({"agentId": "helper", "message": "hello"}, context)["conversationId"]
        == "n-2"
    )
    tools["continueAgentConversation"].run({"conversationId": "n-2", "message": "more"}, context)
    assert agents.calls == [
        {"agent_id": "helper", "message": "hello", "conversation_id": None},
        {"agent_id": None, "message": "more", "conversation_id": "n-2"},
    ]


def test_agent_tools_without_a_way_to_talk_are_not_executed() -> None:
    tools = by_name(dynamic_tools() + a2a_tools([{"name": "x", "agentId": "a"}]))
    assert tools["talkToAgent"].run({"agentId": "a", "message": "m"}, ctx())["status"] == "NOT_EXECUTED"
    assert tools["x"].run({"message": "m"}, ctx())["status"] == "NOT_EXECUTED"
    agents = FakeAgents(PAUSED)
    assert tools["talkToAgent"].run({"message": "m"}, ctx(talk_to_agent=agents))["status"] == "NOT_EXECUTED"
    assert agents.calls == []


# --- the tool set of an llm task ------------------------------------------------------------------------


def llm_task(tools: dict[str, Any]) -> dict[str, Any]:
    return {"id": "assistant", "type": "llm", "provider": {"type": "scripted", "script": []}, "tools": tools}


def document_with(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "bot",
        "workflows": [{"id": "first", "tasks": [tasks[0]]}, {"id": "second", "tasks": list(tasks[1:])}],
    }


def test_toolset_for_collects_every_configured_source(loopback_server: LoopbackServer) -> None:
    task = llm_task(
        {
            "builtin": ["calculate"],
            "http": ["payments", "pets", "missing"],
            "a2a": [{"name": "ask_payments", "agentId": "agent-pay"}],
            "dynamic": True,
            "memory": True,
            "recall": True,
        }
    )
    document = document_with(task, payments_task(loopback_server, TRANSFER), openapi_task(loopback_server))
    toolset = toolset_for(task, document)
    assert [(name, tool.source) for name, tool in toolset.tools.items()] == [
        ("calculate", "builtin"),
        ("transfer_funds", "http"),
        ("listPets", "http"),
        ("createPet", "http"),
        ("showPet", "http"),
        ("deletePet", "http"),
        ("ask_payments", "a2a"),
        ("talkToAgent", "dynamic"),
        ("continueAgentConversation", "dynamic"),
        ("rememberFact", "memory"),
        ("forgetFact", "memory"),
        ("listFacts", "memory"),
        ("searchConversation", "recall"),
    ]
    assert toolset.endpoint_of("transfer_funds") == "post:/accounts/{args.account}/transfers"


def test_toolset_for_without_tools_is_empty() -> None:
    task = {"id": "assistant", "type": "llm"}
    assert toolset_for(task, document_with(task)).tools == {}


def test_name_collisions_first_registrant_wins_builtin_over_http_over_a2a(
    loopback_server: LoopbackServer,
) -> None:
    echo_call = {"name": "echo", "parameters": {"type": "object"}, "request": {"path": "/echo"}}
    shadowing_call = {"name": "ask_payments", "parameters": {"type": "object"}, "request": {"path": "/ask"}}
    task = llm_task(
        {
            "a2a": [{"name": "ask_payments", "agentId": "a"}, {"name": "echo", "agentId": "b"}],
            "http": ["payments"],
            "builtin": ["echo"],
        }
    )
    toolset = toolset_for(
        task, document_with(task, payments_task(loopback_server, echo_call, shadowing_call))
    )
    assert toolset.source_of("echo") == "builtin"
    assert toolset.source_of("ask_payments") == "http"
    assert sorted(toolset.shadowed) == [("ask_payments", "a2a"), ("echo", "a2a"), ("echo", "http")]


def test_a_declared_call_shadows_an_openapi_operation_of_the_same_name(
    loopback_server: LoopbackServer,
) -> None:
    declared = {"name": "listPets", "parameters": {"type": "object"}, "request": {"path": "/declared"}}
    task = {**openapi_task(loopback_server), "calls": [declared]}
    llm = llm_task({"http": ["pets"]})
    toolset = toolset_for(llm, document_with(llm, task))
    assert toolset.endpoint_of("listPets") == "get:/declared"
    assert ("listPets", "http") in toolset.shadowed


def test_memory_and_friends_need_true_not_just_truthy() -> None:
    task = llm_task({"memory": "yes", "recall": 1, "dynamic": True})
    assert [tool.source for tool in toolset_for(task, document_with(task)).tools.values()] == ["dynamic"] * 2


def test_builtin_tools_win_over_every_other_source() -> None:
    builtin = builtin_tools(["echo"])
    a2a = a2a_tools([{"name": "echo", "agentId": "x"}])
    toolset = build_toolset({"a2a": a2a, "memory": memory_tools(), "builtin": builtin})
    assert toolset.get("echo") is builtin[0]


# --- save-time checks of the tools object ----------------------------------------------------------------


def tools_errors(tools: object) -> list[tuple[str, str]]:
    report = DocumentReport()
    check_llm(report, llm_task(tools), "t")
    return [(error.field, error.message) for error in report.errors]


def test_a_complete_tools_object_is_valid() -> None:
    assert (
        tools_errors(
            {
                "builtin": ["getCurrentDateTime", "calculate", "echo"],
                "http": ["payments"],
                "mcp": [{"name": "crm", "url": "http://crm.local/mcp"}],
                "a2a": [{"name": "ask_payments", "agentId": "agent-pay", "description": "d"}],
                "dynamic": True,
                "memory": False,
                "recall": True,
            }
        )
        == []
    )


@pytest.mark.parametrize(
    ("tools", "field", "mentions"),
    [
        ("all", "t.tools", "must be an object"),
        ({"mpc": []}, "t.tools.mpc", "did you mean 'mcp'"),
        ({"plugins": []}, "t.tools.plugins", "known: builtin, http, mcp, a2a, dynamic, memory, recall"),
        ({"builtin": ["getTime"]}, "t.tools.builtin[0]", "unknown builtin tool 'getTime'"),
        ({"builtin": "calculate"}, "t.tools.builtin", "must be an array"),
        ({"http": [3]}, "t.tools.http[0]", "must be a string"),
        ({"mcp": [{"url": "http://x/mcp"}]}, "t.tools.mcp[0].name", "is required"),
        ({"mcp": [{"name": "crm"}]}, "t.tools.mcp[0].url", "is required"),
        ({"mcp": [{"name": "crm", "url": "ftp://x"}]}, "t.tools.mcp[0].url", "http(s) URL"),
        ({"mcp": ["http://x/mcp"]}, "t.tools.mcp[0]", "must be an object"),
        ({"a2a": [{"name": "ask"}]}, "t.tools.a2a[0].agentId", "is required"),
        ({"a2a": [{"agentId": "a"}]}, "t.tools.a2a[0].name", "is required"),
        ({"a2a": [{"name": "ask payments", "agentId": "a"}]}, "t.tools.a2a[0].name", "may only contain"),
        ({"dynamic": "yes"}, "t.tools.dynamic", "must be true or false"),
        ({"memory": 1}, "t.tools.memory", "must be true or false"),
        ({"recall": "no"}, "t.tools.recall", "must be true or false"),
    ],
)
def test_a_bad_tools_object_names_the_field(tools: object, field: str, mentions: str) -> None:
    errors = tools_errors(tools)
    assert [error_field for error_field, _ in errors] == [field]
    assert mentions in errors[0][1]


def references_report(document: dict[str, Any]) -> DocumentReport:
    report = DocumentReport()
    check_llm_tool_references(report, document)
    return report


def test_http_tool_ids_must_name_httpcalls_tasks_of_the_document(loopback_server: LoopbackServer) -> None:
    task = llm_task({"http": ["payments", "paymnts", "parse"]})
    document = document_with(
        task, payments_task(loopback_server, TRANSFER), {"id": "parse", "type": "parser"}
    )
    report = references_report(document)
    assert [(e.field, e.message) for e in report.errors] == [
        (
            "workflows[0].tasks[0].tools.http[1]",
            "'paymnts' is not the id of an httpcalls task of this agent — did you mean 'payments'? "
            "(httpcalls tasks: payments)",
        ),
        (
            "workflows[0].tasks[0].tools.http[2]",
            "'parse' is not the id of an httpcalls task of this agent (httpcalls tasks: payments)",
        ),
    ]
    assert report.warnings == []


def test_an_httpcalls_task_offering_no_tool_is_warned_about(loopback_server: LoopbackServer) -> None:
    fired_only = {"name": "notify", "actions": ["done"], "request": {"path": "/notify"}}
    task = llm_task({"http": ["payments", "pets"]})
    document = document_with(task, payments_task(loopback_server, fired_only), openapi_task(loopback_server))
    report = references_report(document)
    assert report.errors == []
    assert [(w.field, w.message) for w in report.warnings] == [
        (
            "workflows[0].tasks[0].tools.http[0]",
            "httpcalls task 'payments' offers no tool: none of its calls declares 'parameters'",
        )
    ]
