"""The openai provider, driven through the real ``openai`` client against a local Chat Completions stub."""

from __future__ import annotations

import json

import pytest

from harnesses.chat_stub import ChatStub
from toolgate.providers import ModelError, ModelTurn, chat_model_for, tool_result_message
from toolgate.sources import builtin_tools
from toolgate.tools import ToolCall, ToolContext, build_toolset


def model_for(stub: ChatStub, **overrides: str):
    return chat_model_for(
        {"type": "openai", "baseUrl": stub.url + "/v1", "apiKey": "sk-test", "model": "gpt-test"} | overrides
    )


def opening(text: str) -> list[dict]:
    return [{"role": "system", "content": "You calculate."}, {"role": "user", "content": text}]


def test_tool_definitions_model_and_messages_are_sent(chat_stub: ChatStub) -> None:
    toolset = build_toolset({"builtin": builtin_tools(["calculate", "getCurrentDateTime"])})
    chat_stub.reply("Hello")
    turn = model_for(chat_stub).complete(opening("hi"), toolset.for_model(), user_input="hi")
    assert turn == ModelTurn(content="Hello", tool_calls=[])
    (sent,) = chat_stub.requests
    assert sent["model"] == "gpt-test"
    assert sent["messages"] == opening("hi")
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["calculate", "getCurrentDateTime"]
    assert sent["tools"][0] == {
        "type": "function",
        "function": {
            "name": "calculate",
            "description": toolset.get("calculate").description,
            "parameters": toolset.get("calculate").parameters,
        },
    }
    assert chat_stub.headers[0]["authorization"] == "Bearer sk-test"


def test_no_tools_key_is_sent_when_no_tool_is_offered(chat_stub: ChatStub) -> None:
    chat_stub.reply("ok")
    model_for(chat_stub).complete(opening("hi"), [], user_input="hi")
    assert "tools" not in chat_stub.requests[0]


def test_tool_calls_are_parsed_into_tool_calls_with_json_text_arguments(chat_stub: ChatStub) -> None:
    chat_stub.call_tools(
        {"id": "call_a", "name": "calculate", "arguments": {"expression": "6*7"}},
        {"id": "call_b", "name": "getCurrentDateTime", "arguments": "{}"},
        content="Let me work that out.",
    )
    turn = model_for(chat_stub).complete(opening("6*7?"), [], user_input="6*7?")
    assert turn.content == "Let me work that out."
    assert turn.tool_calls == [
        ToolCall(id="call_a", name="calculate", arguments=json.dumps({"expression": "6*7"})),
        ToolCall(id="call_b", name="getCurrentDateTime", arguments="{}"),
    ]


def test_a_tool_call_without_an_id_gets_a_generated_one(chat_stub: ChatStub) -> None:
    chat_stub.call_tools({"id": None, "name": "calculate", "arguments": {"expression": "1"}})
    (call,) = model_for(chat_stub).complete(opening("1"), [], user_input="1").tool_calls
    assert call.id.startswith("gen-") and len(call.id) == len("gen-") + 32


def test_tool_results_are_fed_back_and_the_model_answers(chat_stub: ChatStub) -> None:
    toolset = build_toolset({"builtin": builtin_tools(["calculate"])})
    model = model_for(chat_stub)
    chat_stub.call_tools({"id": "call_1", "name": "calculate", "arguments": {"expression": "6*7"}})
    chat_stub.reply("6*7 is 42.")

    messages = opening("what is 6*7?")
    turn = model.complete(messages, toolset.for_model(), user_input="what is 6*7?")
    messages.append(turn.as_message())
    for call in turn.tool_calls:
        result = toolset.get(call.name).run(json.loads(call.arguments), ToolContext(conversation_id="c"))
        messages.append(tool_result_message(call.id, result))
    final = model.complete(messages, toolset.for_model(), user_input="what is 6*7?")

    assert final == ModelTurn(content="6*7 is 42.", tool_calls=[])
    second = chat_stub.requests[1]
    assert second["messages"][-2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "calculate", "arguments": '{"expression": "6*7"}'},
            }
        ],
    }
    assert second["messages"][-1]["role"] == "tool"
    assert second["messages"][-1]["tool_call_id"] == "call_1"
    assert json.loads(second["messages"][-1]["content"]) == {"expression": "6*7", "result": 42}


def test_an_env_reference_in_the_api_key_is_resolved(
    chat_stub: ChatStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HITL_TEST_LLM_KEY", "sk-from-env")
    chat_stub.reply("ok")
    model_for(chat_stub, apiKey="${env:HITL_TEST_LLM_KEY}").complete(opening("hi"), [], user_input="hi")
    assert chat_stub.headers[0]["authorization"] == "Bearer sk-from-env"


def test_an_unset_env_reference_is_a_model_error_naming_the_reference(
    chat_stub: ChatStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HITL_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ModelError, match=r"\$\{env:HITL_TEST_UNSET_KEY\}"):
        model_for(chat_stub, apiKey="${env:HITL_TEST_UNSET_KEY}")
    assert chat_stub.requests == []


def test_a_caller_token_reference_is_refused_in_the_api_key(chat_stub: ChatStub) -> None:
    with pytest.raises(ModelError, match="only allowed in headers"):
        model_for(chat_stub, apiKey="${caller:token}")


def test_an_error_status_is_a_model_error_without_the_key(chat_stub: ChatStub) -> None:
    chat_stub.fail(401, "bad key sk-test")
    with pytest.raises(ModelError) as raised:
        model_for(chat_stub).complete(opening("hi"), [], user_input="hi")
    assert str(raised.value) == "the model endpoint answered HTTP 401"


def test_an_unreachable_endpoint_is_a_model_error(chat_stub: ChatStub) -> None:
    model = chat_model_for(
        {"type": "openai", "baseUrl": "http://127.0.0.1:9/v1", "apiKey": "k", "model": "m"}
    )
    model.client = model.client.with_options(max_retries=0, timeout=2)
    with pytest.raises(ModelError, match="could not be reached"):
        model.complete(opening("hi"), [], user_input="hi")
