"""Bad bodies of say and start, and agent documents: each is a 4xx naming the field, and nothing is consumed.

Bodies are sent as raw JSON text, since NUL and lone surrogates travel as escapes (``\\u0000``,
``\\ud800``) that a client library would never produce from a Python string.
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest

from common.body_rules import MAX_JSON_DEPTH
from conversations.models import Agent, Conversation, ConversationStep
from harnesses.factories import account_bot, deployed_agent, say, start

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"


def post_json(client: Any, url: str, text: str) -> Any:
    return client.generic("POST", url, text, content_type="application/json")


def fields(response: Any) -> list[str]:
    return [error["field"] for error in response.json()["errors"]]


def state_of(conversation_id: str) -> tuple[str, int]:
    steps = ConversationStep.objects.filter(conversation_id=conversation_id).count()
    return Conversation.objects.get(pk=conversation_id).state, steps


def assert_still_usable(client: Any, conversation_id: str) -> None:
    response = say(client, conversation_id, "hello")
    assert response.status_code == 200, response.content
    assert response.json()["output"] == ["Hello!"]


UNSTORABLE_SAY_BODIES = [
    ('{"input": "a\\u0000b"}', "input"),
    ('{"input": "\\ud800"}', "input"),
    ('{"input": "hello \\udfff"}', "input"),
    ('{"input": "hi", "context": {"k\\u0000": "v"}}', "context.k\\u0000"),
    ('{"input": "hi", "context": {"\\ud800": "v"}}', "context.\\ud800"),
    ('{"input": "hi", "context": {"customer": {"names": ["ok", "x\\u0000"]}}}', "context.customer.names[1]"),
    ('{"input": "hi", "context": {"k": "\\ud83d"}}', "context.k"),
]


@pytest.mark.parametrize(("text", "field"), UNSTORABLE_SAY_BODIES)
def test_nul_byte_in_input_is_400_and_consumes_nothing(alice_client, text, field):
    conversation_id = start(alice_client, deployed_agent())
    before = state_of(conversation_id)
    response = post_json(alice_client, f"/agents/{conversation_id}", text)
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == PROBLEM
    assert response.json()["code"] == "BAD_REQUEST"
    assert fields(response) == [field]
    assert field in response.json()["detail"]
    assert state_of(conversation_id) == before == ("READY", before[1])
    assert_still_usable(alice_client, conversation_id)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"context": {"k": "\\u0000"}}', "context.k"),
        ('{"context": {"\\ud800\\u0000": 1}}', "context.\\ud800\\u0000"),
    ],
)
def test_unstorable_context_at_start_is_400_and_starts_nothing(alice_client, text, field):
    agent_id = deployed_agent()
    response = post_json(alice_client, f"/agents/{agent_id}/start", text)
    assert response.status_code == 400, response.content
    assert fields(response) == [field]
    assert not Conversation.objects.exists()


def test_a_number_too_large_to_store_is_400_and_consumes_nothing(alice_client):
    conversation_id = start(alice_client, deployed_agent())
    before = state_of(conversation_id)
    response = post_json(
        alice_client, f"/agents/{conversation_id}", '{"input": "hi", "context": {"n": 1e400}}'
    )
    assert response.status_code == 400, response.content
    assert fields(response) == ["context.n"]
    assert state_of(conversation_id) == before
    assert_still_usable(alice_client, conversation_id)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 5_000, 100_000])
def test_deeply_nested_json_is_400(alice_client, depth):
    conversation_id = start(alice_client, deployed_agent())
    before = state_of(conversation_id)
    deep = "[" * depth + "]" * depth
    for url, text in [
        (f"/agents/{conversation_id}", f'{{"input": "hi", "context": {{"k": {deep}}}}}'),
        (f"/agents/{conversation_id}", deep),
    ]:
        response = post_json(alice_client, url, text)
        assert response.status_code == 400, response.content
        assert response["Content-Type"] == PROBLEM
        assert "nested" in response.json()["detail"]
    agent_id = Conversation.objects.get(pk=conversation_id).agent_id
    started = post_json(alice_client, f"/agents/{agent_id}/start", f'{{"context": {{"k": {deep}}}}}')
    assert started.status_code == 400, started.content
    assert state_of(conversation_id) == before
    assert Conversation.objects.count() == 1
    assert_still_usable(alice_client, conversation_id)


def test_nesting_up_to_the_limit_is_accepted(alice_client):
    conversation_id = start(alice_client, deployed_agent())
    depth = MAX_JSON_DEPTH - 2  # the body object and the context object are two levels
    text = json.dumps({"input": "hello", "context": {"k": json.loads("[" * depth + "]" * depth)}})
    assert post_json(alice_client, f"/agents/{conversation_id}", text).status_code == 200


def test_body_over_upload_limit_is_413_problem(alice_client, admin_client, settings):
    conversation_id = start(alice_client, deployed_agent())
    before = state_of(conversation_id)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    response = post_json(alice_client, f"/agents/{conversation_id}", json.dumps({"input": "x" * 5000}))
    assert response.status_code == 413, response.content
    assert response["Content-Type"] == PROBLEM
    problem = response.json()
    assert problem["status"] == 413 and problem["code"] == "BAD_REQUEST"
    assert "4096" in problem["detail"] and fields(response) == ["body"]
    assert state_of(conversation_id) == before
    # A ZIP import reads request.body itself: the same limit, the same answer.
    imported = admin_client.post("/backup/import", b"PK" + b"\0" * 5000, content_type="application/zip")
    assert imported.status_code == 413, imported.content
    assert imported["Content-Type"] == PROBLEM
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
    assert_still_usable(alice_client, conversation_id)


def test_say_refuses_unknown_fields(alice_client):
    conversation_id = start(alice_client, deployed_agent())
    before = state_of(conversation_id)
    response = alice_client.post(
        f"/agents/{conversation_id}", {"input": "hello", "contxt": {}, "resume": 1}, format="json"
    )
    assert response.status_code == 400, response.content
    assert fields(response) == ["contxt", "resume"]
    assert "'contxt'" in response.json()["detail"] and "'resume'" in response.json()["detail"]
    assert state_of(conversation_id) == before
    assert_still_usable(alice_client, conversation_id)


def test_start_refuses_unknown_fields(alice_client):
    agent_id = deployed_agent()
    response = alice_client.post(
        f"/agents/{agent_id}/start", {"context": {}, "environment": "test"}, format="json"
    )
    assert response.status_code == 400, response.content
    assert fields(response) == ["environment"]
    assert not Conversation.objects.exists()


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({}, [{"field": "input", "message": "required string"}]),
        ({"input": 5}, [{"field": "input", "message": "required string"}]),
        (
            {"input": None, "context": []},
            [
                {"field": "input", "message": "required string"},
                {"field": "context", "message": "must be an object"},
            ],
        ),
        ({"input": "x" * 16_385}, [{"field": "input", "message": "over 16384 characters"}]),
        ("[]", [{"field": "body", "message": "not an object"}]),
    ],
)
def test_say_names_each_bad_field_and_consumes_nothing(alice_client, body, errors):
    conversation_id = start(alice_client, deployed_agent())
    before = state_of(conversation_id)
    response = post_json(
        alice_client, f"/agents/{conversation_id}", body if isinstance(body, str) else json.dumps(body)
    )
    assert response.status_code == 400, response.content
    assert response.json()["errors"] == errors
    assert state_of(conversation_id) == before


def test_say_takes_blank_input_and_null_context(alice_client):
    conversation_id = start(alice_client, deployed_agent())
    response = alice_client.post(
        f"/agents/{conversation_id}", {"input": "  ", "context": None}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["steps"][-1]["input"] == "  "


def test_start_refuses_a_context_that_is_not_an_object(alice_client):
    response = alice_client.post(f"/agents/{deployed_agent()}/start", {"context": "web"}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["errors"] == [{"field": "context", "message": "must be an object"}]
    assert not Conversation.objects.exists()


def test_say_checks_the_body_before_access(alice_client, bob_client):
    conversation_id = start(alice_client, deployed_agent())
    assert post_json(bob_client, f"/agents/{conversation_id}", '{"input": "\\u0000"}').status_code == 400
    assert bob_client.post(f"/agents/{conversation_id}", {"input": "hi"}, format="json").status_code == 403


# --- agent documents ----------------------------------------------------------------------------------


def _zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def test_agent_document_with_unstorable_text_is_400_naming_the_field(admin_client):
    text = json.dumps(account_bot()).replace('"Hello!"', '"Hel\\u0000lo!"')
    response = post_json(admin_client, "/agentstore/agents", text)
    assert response.status_code == 400, response.content
    assert fields(response) == ["workflows[0].tasks[2].outputs[1].texts[0]"]
    imported = admin_client.post(
        "/backup/import",
        _zip({"good.json": json.dumps(account_bot()), "bad.json": text}),
        content_type="application/zip",
    )
    assert imported.status_code == 400, imported.content
    (error,) = imported.json()["errors"]
    assert (error["file"], error["field"]) == ("bad.json", "workflows[0].tasks[2].outputs[1].texts[0]")
    assert not Agent.objects.exists()


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 100_000])
def test_agent_document_nested_too_deep_in_a_zip_is_400(admin_client, depth):
    document = account_bot()
    document["description"] = "@"
    text = json.dumps(document).replace('"@"', "[" * depth + "]" * depth)
    response = admin_client.post("/backup/import", _zip({"deep.json": text}), content_type="application/zip")
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["file"] == "deep.json"
    assert not Agent.objects.exists()
