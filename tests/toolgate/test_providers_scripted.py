"""The scripted provider answers exactly as docs/tool-gating.md describes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolgate.providers import ModelError, ModelTurn, chat_model_for, tool_result_message
from toolgate.tools import ToolCall


def scripted(*entries: dict[str, Any]):
    return chat_model_for({"type": "scripted", "script": list(entries)})


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You help."}, {"role": "user", "content": text}]


def after_calls(turn: ModelTurn, *results: Any, history: list[dict[str, Any]] | None = None) -> list[dict]:
    messages = (history or user("go")) + [turn.as_message()]
    return messages + [
        tool_result_message(call.id, result) for call, result in zip(turn.tool_calls, results, strict=True)
    ]


def summary_of(reply: str, prefix: str = "Done: ") -> list[dict[str, Any]]:
    assert reply.startswith(prefix)
    return json.loads(reply[len(prefix) :])


def test_the_first_entry_whose_condition_holds_answers() -> None:
    model = scripted(
        {"when": {"inputContains": "transfer"}, "reply": "transferring"},
        {"when": {"inputContains": "money"}, "reply": "money"},
        {"reply": "fallback"},
    )
    assert model.complete(
        user("send money, transfer it"), [], user_input="send money, transfer it"
    ).content == ("transferring")
    assert model.complete(user("money"), [], user_input="money").content == "money"
    assert model.complete(user("hello"), [], user_input="hello").content == "fallback"


def test_input_contains_is_case_insensitive_on_the_turns_input() -> None:
    model = scripted({"when": {"inputContains": "TrAnSfEr"}, "reply": "yes"})
    assert model.complete([], [], user_input="please TRANSFER 5").content == "yes"
    # the condition reads the turn's input, not older messages of the transcript
    assert model.complete(user("transfer"), [], user_input="hello").content == ""


def test_no_matching_entry_replies_with_empty_text() -> None:
    turn = scripted({"when": {"inputContains": "x"}, "reply": "x"}).complete([], [], user_input="y")
    assert turn == ModelTurn(content="", tool_calls=[])


def test_an_empty_script_replies_with_empty_text() -> None:
    assert chat_model_for({"type": "scripted"}).complete([], [], user_input="hi").content == ""


def test_tool_calls_serialize_arguments_to_json_text() -> None:
    model = scripted(
        {
            "toolCalls": [
                {"id": "c1", "name": "transfer", "arguments": {"amount": 5, "to": "bøb"}},
                {"name": "now"},
            ]
        }
    )
    turn = model.complete(user("go"), [], user_input="go")
    assert turn.content is None
    first, second = turn.tool_calls
    assert first == ToolCall(id="c1", name="transfer", arguments='{"amount":5,"to":"bøb"}')
    assert second.name == "now" and json.loads(second.arguments) == {}
    assert second.id.startswith("gen-") and len(second.id) == len("gen-") + 32


def test_after_tool_results_holds_only_when_the_newest_message_is_a_tool_result() -> None:
    model = scripted(
        {"when": {"afterToolResults": True}, "reply": "after"},
        {"toolCalls": [{"id": "c1", "name": "echo", "arguments": {}}]},
    )
    first = model.complete(user("go"), [], user_input="go")
    assert [call.id for call in first.tool_calls] == ["c1"]
    assert model.complete(after_calls(first, {"text": "hi"}), [], user_input="go").content == "after"


def test_after_tool_results_false_holds_when_the_newest_message_is_not_a_tool_result() -> None:
    model = scripted({"when": {"afterToolResults": False}, "reply": "fresh"}, {"reply": "other"})
    assert model.complete(user("go"), [], user_input="go").content == "fresh"
    first = ModelTurn(content=None, tool_calls=[ToolCall("c1", "echo")])
    assert model.complete(after_calls(first, "x"), [], user_input="go").content == "other"


def test_all_conditions_of_one_when_must_hold() -> None:
    model = scripted({"when": {"inputContains": "pay", "afterToolResults": True}, "reply": "paid"})
    first = ModelTurn(content=None, tool_calls=[ToolCall("c1", "echo")])
    assert model.complete(after_calls(first, "x"), [], user_input="pay").content == "paid"
    assert model.complete(after_calls(first, "x"), [], user_input="hello").content == ""
    assert model.complete(user("pay"), [], user_input="pay").content == ""


def test_tool_results_expand_with_name_status_and_result() -> None:
    model = scripted({"when": {"afterToolResults": True}, "reply": "Done: {toolResults}"})
    calls = ModelTurn(
        content=None,
        tool_calls=[ToolCall("a", "transfer_funds"), ToolCall("b", "get_balance"), ToolCall("c", "now")],
    )
    rejected = {"status": "REJECTED_BY_REVIEWER", "tool": "transfer_funds", "note": "no"}
    messages = after_calls(calls, rejected, {"balance": 10}, "2025-01-01T00:00:00Z")
    assert summary_of(model.complete(messages, [], user_input="go").content) == [
        {"name": "transfer_funds", "status": "REJECTED_BY_REVIEWER", "result": rejected},
        {"name": "get_balance", "status": "OK", "result": {"balance": 10}},
        {"name": "now", "status": "OK", "result": "2025-01-01T00:00:00Z"},
    ]


@pytest.mark.parametrize(
    "status", ["REJECTED_BY_REVIEWER", "NOT_EXECUTED", "EXECUTION_OUTCOME_UNKNOWN", "DENIED", "EXECUTED"]
)
def test_a_results_own_status_field_is_its_status(status: str) -> None:
    model = scripted({"reply": "Done: {toolResults}"})
    messages = after_calls(ModelTurn(None, [ToolCall("a", "t")]), {"status": status, "reason": "r"})
    assert summary_of(model.complete(messages, [], user_input="").content)[0]["status"] == status


def test_only_the_trailing_run_of_tool_results_expands() -> None:
    model = scripted({"reply": "Done: {toolResults}"})
    first = ModelTurn(None, [ToolCall("a", "first_tool")])
    history = after_calls(first, {"n": 1}) + [
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "more"},
    ]
    second = ModelTurn(None, [ToolCall("b", "second_tool")])
    messages = after_calls(second, {"n": 2}, history=history)
    assert summary_of(model.complete(messages, [], user_input="more").content) == [
        {"name": "second_tool", "status": "OK", "result": {"n": 2}}
    ]


def test_tool_results_expand_to_an_empty_array_when_none_were_just_received() -> None:
    model = scripted({"reply": "Done: {toolResults}"})
    assert model.complete(user("go"), [], user_input="go").content == "Done: []"


def test_a_reply_without_the_placeholder_is_returned_verbatim() -> None:
    model = scripted({"reply": "Hello {properties.name} {toolResults"})
    assert model.complete(user("go"), [], user_input="go").content == "Hello {properties.name} {toolResults"


def test_an_unknown_provider_type_is_a_model_error() -> None:
    with pytest.raises(ModelError, match="unknown provider type"):
        chat_model_for({"type": "anthropic"})


def test_a_turn_becomes_an_openai_assistant_message() -> None:
    turn = ModelTurn(content=None, tool_calls=[ToolCall("c1", "echo", '{"text":"hi"}')])
    assert turn.as_message() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": '{"text":"hi"}'}}
        ],
    }
    assert ModelTurn(content="hi").as_message() == {"role": "assistant", "content": "hi"}
    assert tool_result_message("c1", {"a": 1}) == {"role": "tool", "tool_call_id": "c1", "content": '{"a":1}'}
    assert tool_result_message("c1", "text") == {"role": "tool", "tool_call_id": "c1", "content": "text"}
