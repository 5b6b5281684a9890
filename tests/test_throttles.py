"""The per-user request rates (common/throttles.py, docs/operations.md "Throttles and caps").

The suite runs with both rates off (hitl_project/settings/test.py); each test here turns on the rate it
needs through the settings, which the throttles read on every request. The counts live in the database
cache table, inside each test's transaction. Across two server processes: tests/e2e/test_live_throttle.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import caches
from django.core.cache.backends.db import DatabaseCache
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from approvals.models import Pause
from common.throttle_rates import throttle_rate
from common.throttles import THROTTLE_CACHE
from conversations.models import Conversation, ConversationStep
from harnesses.factories import deployed_agent, say, start
from mcp_surface import conversation_tools
from mcp_surface.server import _call

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"


@pytest.fixture
def mcp_in_test_transaction(monkeypatch):
    """Tool calls run as the MCP server runs them (``_call``), on the test's connection: the server's
    connection hygiene would close the connection that holds the test's transaction."""
    monkeypatch.setattr("mcp_surface.server.close_old_connections", lambda: None)


def written() -> tuple[int, int, int]:
    return Conversation.objects.count(), ConversationStep.objects.count(), Pause.objects.count()


def assert_throttled(response: Any) -> dict[str, Any]:
    """A 429 problem with Retry-After (whole seconds, at least 1) and the same number in the body."""
    assert response.status_code == 429, response.content
    assert response["Content-Type"].startswith(PROBLEM), response["Content-Type"]
    body = response.json()
    assert (body["status"], body["code"], body["title"]) == (429, "THROTTLED", "Too many requests"), body
    retry_after = int(response["Retry-After"])
    assert 1 <= retry_after <= 60, retry_after
    assert body["retryAfter"] == retry_after
    assert "throttled" in body["detail"]
    return body


def test_a_user_over_the_turn_rate_gets_429_with_retry_after_and_the_throttled_request_wrote_nothing(
    settings, alice_client
):
    settings.HITL_THROTTLE_TURNS_RATE = "2/min"
    agent_id = deployed_agent()
    conversation_id = start(alice_client, agent_id)
    assert say(alice_client, conversation_id, "hello").status_code == 200
    before = written()
    steps = alice_client.get(f"/agents/{conversation_id}").json()["stepCount"]

    assert_throttled(say(alice_client, conversation_id, "please delete my account"))
    assert_throttled(alice_client.post(f"/agents/{agent_id}/start", format="json"))

    assert written() == before
    assert alice_client.get(f"/agents/{conversation_id}").json()["stepCount"] == steps  # input not consumed


def test_another_user_is_not_affected_by_someone_elses_turn_rate(settings, alice_client, bob_client):
    settings.HITL_THROTTLE_TURNS_RATE = "1/min"
    agent_id = deployed_agent()
    start(alice_client, agent_id)
    assert_throttled(alice_client.post(f"/agents/{agent_id}/start", format="json"))

    assert bob_client.post(f"/agents/{agent_id}/start", format="json").status_code == 201


def test_anonymous_requests_are_refused_401_before_any_rate_and_never_counted(settings, anon_client):
    settings.HITL_THROTTLE_TURNS_RATE = settings.HITL_THROTTLE_WRITES_RATE = "1/min"
    agent_id = deployed_agent()

    answers = {anon_client.post(f"/agents/{agent_id}/start", format="json").status_code for _ in range(3)}

    assert answers == {401}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM hitl_throttle_cache")
        assert cursor.fetchone()[0] == 0


def test_reads_are_never_counted(settings, alice_client):
    settings.HITL_THROTTLE_TURNS_RATE = settings.HITL_THROTTLE_WRITES_RATE = "1/min"
    agent_id = deployed_agent()
    conversation_id = start(alice_client, agent_id)
    for _ in range(5):
        assert alice_client.get(f"/agents/{conversation_id}").status_code == 200
        assert alice_client.get("/agents/pending-approvals").status_code == 200

    assert alice_client.post(f"/agents/{conversation_id}/undo").status_code == 200  # the one write allowed


def test_turns_and_other_writes_are_counted_apart_whatever_their_answer(settings, alice_client):
    settings.HITL_THROTTLE_TURNS_RATE = "1/min"
    settings.HITL_THROTTLE_WRITES_RATE = "2/min"
    agent_id = deployed_agent()
    conversation_id = start(alice_client, agent_id)
    assert_throttled(alice_client.post(f"/agents/{agent_id}/start", format="json"))

    # writes: a refused one counts too (nothing to redo is a 409), the third is throttled before the view
    assert alice_client.post(f"/agents/{conversation_id}/redo").status_code == 409
    assert alice_client.post(f"/agents/{conversation_id}/undo").status_code == 200
    assert_throttled(alice_client.post(f"/agents/{conversation_id}/redo"))
    assert alice_client.get(f"/agents/{conversation_id}").json()["stepCount"] == 0  # the redo never ran


def test_a_rate_is_read_at_request_time_and_off_turns_it_off(settings, alice_client):
    settings.HITL_THROTTLE_TURNS_RATE = "1/min"
    agent_id = deployed_agent()
    start(alice_client, agent_id)
    assert_throttled(alice_client.post(f"/agents/{agent_id}/start", format="json"))

    settings.HITL_THROTTLE_TURNS_RATE = "off"
    assert alice_client.post(f"/agents/{agent_id}/start", format="json").status_code == 201
    settings.HITL_THROTTLE_TURNS_RATE = "5/min"  # a higher rate takes effect at once too
    assert alice_client.post(f"/agents/{agent_id}/start", format="json").status_code == 201


def test_the_counts_live_in_the_database_cache_every_process_shares(settings, alice, alice_client):
    settings.HITL_THROTTLE_TURNS_RATE = "5/min"
    assert isinstance(caches[THROTTLE_CACHE], DatabaseCache)

    start(alice_client, deployed_agent())

    with connection.cursor() as cursor:
        cursor.execute("SELECT cache_key FROM hitl_throttle_cache")
        keys = [row[0] for row in cursor.fetchall()]
    assert [key for key in keys if key.endswith(f"throttle_turns_{alice.pk}")], keys


def test_the_mcp_talk_tools_count_against_the_same_turn_rate_as_rest(
    settings, alice, alice_client, mcp_in_test_transaction
):
    settings.HITL_THROTTLE_TURNS_RATE = "2/min"
    agent_id = deployed_agent()
    start(alice_client, agent_id)  # REST: 1
    talked = _call(conversation_tools.talk_to_agent, alice, {"agent_id": agent_id, "message": "hello"})
    assert not talked.is_error, talked.structured_content  # MCP: 2
    before = written()

    refused = _call(conversation_tools.chat_managed, alice, {"agent_id": agent_id, "message": "hello"})

    assert refused.is_error
    answer = refused.structured_content
    assert answer["errorCode"] == "CONFLICT", answer  # EDDI's codes have none for a rate
    assert answer["details"]["code"] == "THROTTLED"
    assert answer["details"]["setting"] == "HITL_THROTTLE_TURNS_RATE"
    assert answer["details"]["retryAfter"] >= 1
    assert written() == before
    assert_throttled(alice_client.post(f"/agents/{agent_id}/start", format="json"))  # and REST sees it


def test_the_mcp_decision_tools_count_against_the_writes_rate(
    settings, alice, alice_client, mcp_in_test_transaction
):
    settings.HITL_THROTTLE_WRITES_RATE = "1/min"
    conversation_id = start(alice_client, deployed_agent())
    first = _call(conversation_tools.cancel_conversation, alice, {"conversation_id": conversation_id})
    assert first.structured_content["errorCode"] == "WRONG_STATE"  # nothing to cancel, but counted

    second = _call(conversation_tools.cancel_conversation, alice, {"conversation_id": conversation_id})

    assert second.structured_content["details"]["code"] == "THROTTLED", second.structured_content


def test_the_schema_declares_429_on_every_unsafe_operation_and_409_on_every_turn(anon_client):
    schema = anon_client.get("/api/schema/", {"format": "json"}).json()
    unsafe = {
        f"{method.upper()} {path}": operation["responses"]
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if method in ("post", "put", "patch", "delete")
        and operation.get("security")
        and {} not in operation["security"]
    }
    assert len(unsafe) > 30
    assert [key for key, responses in unsafe.items() if "429" not in responses] == []
    turns = [
        "POST /agents/{agent_id}/start",
        "POST /agents/{conversation_id}",
        "POST /groups/{group_id}/conversations",
        "POST /groups/{group_id}/conversations/stream",
    ]
    assert [key for key in turns if "409" not in unsafe[key]] == []
    codes = schema["components"]["schemas"]["Problem"]["properties"]["code"]["enum"]
    assert {"THROTTLED", "LIMIT_REACHED"} <= set(codes)


@pytest.mark.parametrize(
    ("value", "rate"),
    [("60/min", "60/min"), (" 5 / Hour ", "5/hour"), ("", "off"), ("OFF", "off"), ("10/s", "10/s")],
)
def test_a_rate_setting_is_n_per_period_or_off(value: str, rate: str):
    assert throttle_rate(value) == rate


@pytest.mark.parametrize("value", ["60", "0/min", "60/fortnight", "-1/min", "sixty/min", "60/min/2"])
def test_a_rate_setting_that_is_not_a_rate_refuses_to_start(value: str):
    with pytest.raises(ImproperlyConfigured, match="HITL_THROTTLE_TURNS_RATE"):
        throttle_rate(value, setting="HITL_THROTTLE_TURNS_RATE")
