"""A failed turn never locks a conversation: whatever a turn raises, it is usable again in the same request."""

from __future__ import annotations

from typing import Any

import pytest

from approvals.models import AuditEntry, Pause, PauseStatus
from conversations import turns
from conversations.models import Agent, AgentVersion, Conversation, ConversationStep, Deployment
from conversations.pipeline.registry import register_task_type
from harnesses.factories import deployed_agent, start
from harnesses.queue_drain import run_queued_tasks

# Autocommit, as in production: a statement PostgreSQL refuses aborts the transaction it ran in.
pytestmark = pytest.mark.django_db(transaction=True)

LEAKY_KEY = "sk-live-" + "x" * 32


def _explode(task: dict[str, Any], memory: Any, turn: Any) -> None:
    if "fetch_profile" in memory.current.actions:
        raise RuntimeError(f"upstream refused api_key={LEAKY_KEY}\nsecond line with more detail")


register_task_type("explode", _explode)


def profile_agent(
    target_url: str, *, failing_task: bool = False, pause_first: bool = False
) -> dict[str, Any]:
    """'profile' fetches /profile and answers; 'hello' answers without calling anything.

    ``pause_first`` puts an approval before the fetch; ``failing_task`` runs a task that raises instead.
    """
    fetch: dict[str, Any] = {
        "id": "fetch",
        "type": "httpcalls",
        "targetServerUrl": target_url,
        "calls": [
            {
                "name": "profile",
                "actions": ["fetch_profile"],
                "request": {"method": "GET", "path": "/profile"},
            }
        ],
    }
    if failing_task:
        fetch = {"id": "fetch", "type": "explode"}
    actions = ["PAUSE_CONVERSATION", "fetch_profile"] if pause_first else ["fetch_profile"]
    return {
        "name": "profile-bot",
        "workflows": [
            {
                "id": "main",
                "tasks": [
                    {
                        "id": "parse",
                        "type": "parser",
                        "dictionaries": [
                            {"word": "profile", "expressions": "profile(me)"},
                            {"word": "hello", "expressions": "greeting(hello)"},
                        ],
                    },
                    {
                        "id": "rules",
                        "type": "behavior_rules",
                        "rules": [
                            {
                                "name": "Profile",
                                "actions": actions,
                                "conditions": [
                                    {"type": "inputmatcher", "configs": {"expressions": "profile(*)"}}
                                ],
                            },
                            {
                                "name": "Greet",
                                "actions": ["say_hello"],
                                "conditions": [
                                    {"type": "inputmatcher", "configs": {"expressions": "greeting(*)"}}
                                ],
                            },
                        ],
                    },
                    fetch,
                    {
                        "id": "output",
                        "type": "output",
                        "outputs": [
                            {"action": "fetch_profile", "texts": ["Profile fetched."]},
                            {"action": "say_hello", "texts": ["Hello!"]},
                        ],
                    },
                ],
            }
        ],
    }


def deployed(document: dict[str, Any]) -> str:
    """Deploy a document as stored rows: a test-only task type would not pass the save-time checks."""
    if not any(task["type"] == "explode" for task in document["workflows"][0]["tasks"]):
        return deployed_agent(document)
    agent = Agent.objects.create(name=document["name"])
    AgentVersion.objects.create(agent=agent, version=1, document=document)
    Deployment.objects.create(agent=agent, version=1, environment="production")
    return str(agent.pk)


def latest_step(conversation_id: str) -> ConversationStep:
    return ConversationStep.objects.filter(conversation_id=conversation_id).order_by("-index").first()


def say_over_rest(client, conversation_id: str, text: str, context: Any = None) -> str:
    response = client.post(
        f"/agents/{conversation_id}",
        {"input": text, **({"context": context} if context else {})},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()["state"]


def say_directly(alice, conversation_id: str, text: str, context: Any = None) -> str:
    """The service itself, as an MCP tool or a nested agent calls it: no REST door in front."""
    conversation = Conversation.objects.get(pk=conversation_id)
    return turns.say(
        conversation=conversation, user=alice, user_input=text, context=context
    ).conversation.state


FAILURES = {
    # a remote API answers JSON holding \u0000: PostgreSQL refuses the step's jsonb, aborting the transaction
    "remote answer PostgreSQL refuses": ("rest", "profile", None, "DataError"),
    "a task raises": ("rest", "profile", None, "RuntimeError"),
    "NUL in input": ("direct", "hello\x00there", None, "DataError"),
    "lone surrogate in input": ("direct", "hello \ud800", None, "UnicodeEncodeError"),
    "NUL in a context key": ("direct", "hello", {"ch\x00annel": "web"}, "DataError"),
    "NUL in a context value": ("direct", "hello", {"channel": "w\x00eb"}, "DataError"),
}


@pytest.mark.parametrize("failure", list(FAILURES), ids=list(FAILURES))
def test_failed_turn_never_locks_conversation(failure, alice, alice_client, loopback_server):
    how, text, context, error_type = FAILURES[failure]
    loopback_server.respond("/profile", json_body={"name": "Ali\u0000ce"})
    conversation_id = start(
        alice_client, deployed(profile_agent(loopback_server.url, failing_task=failure == "a task raises"))
    )
    steps_before = ConversationStep.objects.filter(conversation_id=conversation_id).count()

    if how == "rest":
        state = say_over_rest(alice_client, conversation_id, text, context)
    else:
        state = say_directly(alice, conversation_id, text, context)

    assert state == "ERROR"
    assert Conversation.objects.get(pk=conversation_id).state == "ERROR"
    step = latest_step(conversation_id)
    assert ConversationStep.objects.filter(conversation_id=conversation_id).count() == steps_before + 1
    assert step.data["error"].startswith(f"{error_type}")
    assert LEAKY_KEY not in step.data["error"] and "second line" not in step.data["error"]
    assert "\x00" not in step.input
    # the next turn runs normally, over REST, without waiting for any sweep
    assert say_over_rest(alice_client, conversation_id, "hello") == "READY"
    assert alice_client.get(f"/agents/{conversation_id}").json()["output"] == ["Hello!"]


def test_a_task_error_is_recorded_redacted_on_the_step(alice_client, loopback_server):
    conversation_id = start(alice_client, deployed(profile_agent(loopback_server.url, failing_task=True)))
    assert say_over_rest(alice_client, conversation_id, "profile") == "ERROR"
    assert latest_step(conversation_id).data["error"] == "RuntimeError: upstream refused api_key=<REDACTED>"


@pytest.mark.parametrize(
    "failing_task", [False, True], ids=["remote answer PostgreSQL refuses", "a task raises"]
)
def test_failed_continuation_never_locks_conversation(
    failing_task, alice_client, approver_client, loopback_server
):
    loopback_server.respond("/profile", json_body={"name": "Ali\u0000ce"})
    conversation_id = start(
        alice_client,
        deployed(profile_agent(loopback_server.url, failing_task=failing_task, pause_first=True)),
    )
    assert say_over_rest(alice_client, conversation_id, "profile") == "AWAITING_HUMAN"
    paused_step = latest_step(conversation_id)
    response = approver_client.post(
        f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json"
    )
    assert response.status_code == 200, response.content

    assert run_queued_tasks() == 1

    assert Conversation.objects.get(pk=conversation_id).state == "ERROR"
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == PauseStatus.RESOLVED
    step = latest_step(conversation_id)
    assert step.pk == paused_step.pk  # the continued step, not a new one
    assert step.data["error"].startswith("RuntimeError" if failing_task else "DataError")
    failed = AuditEntry.objects.get(pause_id=pause.id, verb="hitl.continuation.failed")
    assert failed.detail["error"] == step.data["error"]
    assert say_over_rest(alice_client, conversation_id, "hello") == "READY"


def test_a_failed_start_turn_never_locks_the_new_conversation(alice_client, loopback_server):
    document = profile_agent(loopback_server.url, failing_task=True)
    document["workflows"][0]["tasks"][1]["rules"][0]["conditions"] = [
        {"type": "actionmatcher", "configs": {"actions": "CONVERSATION_START"}}
    ]
    response = alice_client.post(f"/agents/{deployed(document)}/start", format="json")
    assert response.status_code == 201 and response.json()["state"] == "ERROR"
    assert say_over_rest(alice_client, response.json()["conversationId"], "hello") == "READY"
