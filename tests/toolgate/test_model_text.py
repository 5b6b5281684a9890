"""What the model answers is made storable before anything reads it (toolgate.model_text), and a call of a
tool the agent does not have never pauses: a hostile name, id or argument can never fail the turn."""

from __future__ import annotations

import json

import pytest

from harnesses.factories import deployed_agent, say, start
from tests.toolgate.test_openai_end_to_end import openai_payments_agent
from toolgate.model_text import REPLACEMENT, storable_arguments, storable_turn
from toolgate.providers.turn import ModelTurn
from toolgate.tools import ToolCall


def test_nul_and_lone_surrogates_become_the_replacement_character_everywhere_in_an_answer():
    turn = storable_turn(
        ModelTurn(
            content="hi\x00 \ud800",
            tool_calls=[ToolCall("c1", "transfer\x00", '{"to": "bob\\u0000", "k\\ud800": "\udfff"}')],
        )
    )
    assert turn.content == f"hi{REPLACEMENT} {REPLACEMENT}"
    (call,) = turn.tool_calls
    assert call.name == f"transfer{REPLACEMENT}"
    assert json.loads(call.arguments) == {"to": f"bob{REPLACEMENT}", f"k{REPLACEMENT}": REPLACEMENT}


def test_storable_arguments_are_left_exactly_as_written():
    text = '{"to":  "bob", "note": "caf\\u00e9 \\ud83d\\ude00"}'  # an escaped pair is a valid character
    assert storable_arguments(text) == text


@pytest.mark.django_db
@pytest.mark.parametrize(
    "name",
    ["t" * 300, "transfer_\ud800", "transfer_funds\x00", "transfer_funds "],
    ids=["300-characters", "lone-surrogate", "nul", "trailing-space"],
)
def test_a_call_of_an_unknown_or_unstorable_tool_name_never_pauses_nor_fails_the_turn(
    alice_client, chat_stub, loopback_server, name
):
    chat_stub.reply("hello")
    chat_stub.call_tools({"id": "c1", "name": name, "arguments": '{"amount": 1, "to": "bob\\u0000"}'})
    chat_stub.reply("done")
    document = openai_payments_agent(chat_stub.url, loopback_server.url)
    document["hitlConfig"]["toolApprovals"] = {"requireApproval": ["*"]}  # every known tool is gated
    conversation_id = start(alice_client, deployed_agent(document))
    answer = say(alice_client, conversation_id, "go")
    assert answer.status_code == 200 and answer.json()["state"] == "READY", answer.content
    assert loopback_server.received == []
    (tool_message,) = [m for m in chat_stub.requests[-1]["messages"] if m["role"] == "tool"]
    assert "unknown tool" in tool_message["content"]
