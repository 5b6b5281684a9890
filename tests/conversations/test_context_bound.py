"""The bound on a turn's stored context (``HITL_CONTEXT_MAX_BYTES``, common/body_rules.py): at most that
many bytes of canonical JSON on start and say, a 400 naming ``context`` over it, nothing consumed.
Just under and just over, on both: tests/test_size_limits.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from common.body_rules import canonical_json_bytes
from conversations.models import Conversation, ConversationStep
from harnesses.factories import deployed_agent, start

pytestmark = pytest.mark.django_db


def post_json(client: Any, url: str, text: str) -> Any:
    return client.generic("POST", url, text, content_type="application/json")


def test_the_size_is_canonical_json_in_utf8_however_the_client_wrote_it():
    context = {"b": ["é", 1], "a": {"x": None}}
    canonical = '{"a":{"x":null},"b":["é",1]}'

    assert canonical_json_bytes(context) == len(canonical.encode("utf-8")) == 29


def test_a_context_over_the_bound_is_a_400_naming_context_and_consumes_nothing(settings, alice_client):
    settings.HITL_CONTEXT_MAX_BYTES = 64
    agent_id = deployed_agent()
    conversation_id = start(alice_client, agent_id)
    steps = ConversationStep.objects.count()
    conversations = Conversation.objects.count()
    # 11 "é" are 22 bytes of UTF-8 but 66 characters as the escapes a client sends: the bytes count
    fits = {"note": "é" * 11, "pad": "x" * 22}
    assert canonical_json_bytes(fits) == 64
    over = {**fits, "pad": "x" * 23}

    refused = [
        post_json(alice_client, f"/agents/{agent_id}/start", json.dumps({"context": over})),
        post_json(alice_client, f"/agents/{conversation_id}", json.dumps({"input": "hi", "context": over})),
    ]
    for response in refused:
        assert response.status_code == 400, response.content
        body = response.json()
        assert body["code"] == "BAD_REQUEST"
        assert body["errors"] == [
            {
                "field": "context",
                "message": "is 65 bytes of JSON, over the limit of 64 bytes (HITL_CONTEXT_MAX_BYTES)",
            }
        ]
    assert (ConversationStep.objects.count(), Conversation.objects.count()) == (steps, conversations)

    spaced = json.dumps({"input": "hi", "context": fits}, indent=8)  # whitespace is not counted
    assert post_json(alice_client, f"/agents/{conversation_id}", spaced).status_code == 200


def test_a_bound_of_0_is_no_bound(settings, alice_client):
    settings.HITL_CONTEXT_MAX_BYTES = 0
    agent_id = deployed_agent()

    response = alice_client.post(
        f"/agents/{agent_id}/start", {"context": {"k": "x" * 200_000}}, format="json"
    )

    assert response.status_code == 201, response.content[:300]
