"""Managed conversations (conversations/managed.py, docs/rest-api.md "Managed conversations"): EDDI's agent
trigger store and its ``/agents/managed/{intent}/{userId}`` endpoints, with EDDI's paths and bodies, through
DRF's test client against real PostgreSQL; the races with real threads."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections
from rest_framework.test import APIClient

from conversations.models import AgentTrigger, Conversation, ManagedConversation
from harnesses.factories import account_bot, deployed_agent
from harnesses.users import client_for, make_user

TRIGGERS = "/AgentTriggerStore/agenttriggers"
SUPPORT = "/agents/managed/support/alice"


def configuration(*agent_ids: str, intent: str | None = "support", **deployment: Any) -> dict[str, Any]:
    """EDDI's AgentTriggerConfiguration: the intent and a deployment of each agent."""
    body: dict[str, Any] = {
        "agentDeployments": [
            {"environment": "production", "agentId": agent_id, "initialContext": {}, **deployment}
            for agent_id in agent_ids
        ]
    }
    if intent is not None:
        body["intent"] = intent
    return body


@pytest.fixture
def support(admin_client) -> str:
    """The intent "support" routed to the account bot (deployed in production): the agent's id."""
    agent_id = deployed_agent()
    created = admin_client.post(TRIGGERS, configuration(agent_id), format="json")
    assert created.status_code == 201, created.content
    return agent_id


def mapped(username: str, intent: str = "support") -> str | None:
    row = ManagedConversation.objects.filter(intent=intent, user__username=username).first()
    return str(row.conversation_id) if row is not None and row.conversation_id else None


# --- the managed conversation --------------------------------------------------------------------------


def test_the_first_read_starts_a_conversation_for_the_intent_owned_by_the_caller(
    support, alice, alice_client
):
    response = alice_client.get(SUPPORT)

    assert response.status_code == 200, response.content
    snapshot = response.json()
    assert snapshot["agentId"] == support and snapshot["environment"] == "production"
    assert snapshot["state"] == "READY" and snapshot["stepCount"] == 1  # the start turn
    assert mapped("alice") == snapshot["conversationId"]
    assert Conversation.objects.get(pk=snapshot["conversationId"]).owner == alice


def test_the_first_say_starts_a_conversation_and_says_in_it(support, alice_client):
    response = alice_client.post(SUPPORT, {"input": "hello", "context": {}}, format="json")

    assert response.status_code == 200, response.content
    snapshot = response.json()
    assert snapshot["output"] == ["Hello!"]
    assert [step["input"] for step in snapshot["steps"]] == ["", "hello"]
    assert mapped("alice") == snapshot["conversationId"]


def test_every_later_call_acts_on_the_same_conversation(support, alice_client):
    first = alice_client.get(SUPPORT).json()["conversationId"]

    said = alice_client.post(SUPPORT, {"input": "hello"}, format="json")
    read = alice_client.get(SUPPORT)

    assert said.json()["conversationId"] == read.json()["conversationId"] == first
    assert read.json()["stepCount"] == 2
    assert Conversation.objects.count() == 1 and ManagedConversation.objects.count() == 1


def test_each_user_and_each_intent_has_a_conversation_of_its_own(support, admin_client, alice_client, bob):
    admin_client.post(TRIGGERS, configuration(support, intent="billing"), format="json")

    support_of_alice = alice_client.get(SUPPORT).json()["conversationId"]
    billing_of_alice = alice_client.get("/agents/managed/billing/alice").json()["conversationId"]
    support_of_bob = client_for(bob).get("/agents/managed/support/bob").json()["conversationId"]

    assert len({support_of_alice, billing_of_alice, support_of_bob}) == 3
    assert Conversation.objects.get(pk=support_of_bob).owner == bob


def test_after_end_conversation_the_next_call_starts_a_new_one(support, alice_client):
    first = alice_client.get(SUPPORT).json()["conversationId"]

    ended = alice_client.post(f"{SUPPORT}/endConversation")
    second = alice_client.get(SUPPORT).json()["conversationId"]

    assert ended.status_code == 200, ended.content
    assert ended.json()["conversationId"] == first and ended.json()["state"] == "ENDED"
    assert second != first
    assert mapped("alice") == second and ManagedConversation.objects.count() == 1
    assert Conversation.objects.get(pk=first).state == "ENDED"


def test_a_say_after_end_conversation_says_in_a_new_conversation(support, alice_client):
    first = alice_client.get(SUPPORT).json()["conversationId"]
    alice_client.post(f"{SUPPORT}/endConversation")

    said = alice_client.post(SUPPORT, {"input": "hello"}, format="json")

    assert said.status_code == 200, said.content
    assert said.json()["conversationId"] != first and said.json()["output"] == ["Hello!"]


def test_a_deleted_conversation_is_replaced_by_a_new_one(support, alice_client):
    first = alice_client.get(SUPPORT).json()["conversationId"]
    Conversation.objects.filter(pk=first).delete()

    second = alice_client.get(SUPPORT).json()["conversationId"]

    assert second != first and mapped("alice") == second


def test_ending_with_nothing_to_end_is_200(support, alice_client):
    response = alice_client.post(f"{SUPPORT}/endConversation")

    assert response.status_code == 200, response.content
    assert response.json() is None
    assert Conversation.objects.count() == 0


def test_a_say_while_awaiting_approval_is_409_and_the_intent_stays_on_the_paused_conversation(
    support, alice_client, approver_client
):
    paused = alice_client.post(SUPPORT, {"input": "please delete my account"}, format="json").json()
    assert paused["state"] == "AWAITING_HUMAN"

    refused = alice_client.post(SUPPORT, {"input": "hello"}, format="json")
    read = alice_client.get(SUPPORT)

    assert refused.status_code == 409 and refused.json()["code"] == "WRONG_STATE", refused.content
    assert refused.json()["currentState"] == "AWAITING_HUMAN"
    assert read.json()["conversationId"] == paused["conversationId"]
    assert read.json()["state"] == "AWAITING_HUMAN" and read.json()["stepCount"] == paused["stepCount"]
    assert mapped("alice") == paused["conversationId"] and Conversation.objects.count() == 1

    decided = approver_client.post(
        f"/agents/{paused['conversationId']}/resume?wait=5", {"verdict": "APPROVED"}, format="json"
    )
    assert decided.status_code == 200, decided.content
    said = alice_client.post(SUPPORT, {"input": "hello"}, format="json")
    assert said.status_code == 200 and said.json()["conversationId"] == paused["conversationId"]


def test_the_trigger_context_starts_the_conversation_as_plain_values(admin_client, alice_client):
    agent_id = deployed_agent()
    initial = {
        "channel": {"type": "string", "value": "web"},
        "customer": {"type": "object", "value": {"tier": "gold"}},
        "topic": {"type": "expressions", "value": "topic(billing)"},
    }
    admin_client.post(TRIGGERS, configuration(agent_id, initialContext=initial), format="json")

    conversation_id = alice_client.get(SUPPORT).json()["conversationId"]

    conversation = Conversation.objects.get(pk=conversation_id)
    assert conversation.context == {"channel": "web", "customer": {"tier": "gold"}, "topic": "topic(billing)"}
    assert conversation.steps.get(index=0).context == conversation.context


def test_one_of_several_deployments_is_picked_at_random(admin_client, alice_client, monkeypatch):
    first, second = deployed_agent(), deployed_agent(account_bot(name="second"))
    admin_client.post(TRIGGERS, configuration(first, second), format="json")
    offered: list[list[str]] = []

    def choice(deployments: list[dict[str, Any]]) -> dict[str, Any]:
        offered.append([d["agentId"] for d in deployments])
        return deployments[-1]

    monkeypatch.setattr("conversations.managed.secrets.choice", choice)

    snapshot = alice_client.get(SUPPORT).json()

    assert offered == [[first, second]]
    assert snapshot["agentId"] == second


def test_a_deployment_in_test_starts_on_the_version_deployed_in_test(admin_client, alice_client):
    agent_id = deployed_agent(environment="test")
    admin_client.post(TRIGGERS, configuration(agent_id, environment="test"), format="json")

    snapshot = alice_client.get(SUPPORT).json()

    assert snapshot["environment"] == "test" and snapshot["agentId"] == agent_id


def test_an_agent_not_deployed_is_409_and_nothing_is_mapped(admin_client, alice_client):
    agent_id = deployed_agent(environment="test")
    admin_client.post(TRIGGERS, configuration(agent_id), format="json")  # production: not deployed there

    response = alice_client.get(SUPPORT)

    assert response.status_code == 409 and response.json()["code"] == "NOT_DEPLOYED", response.content
    assert ManagedConversation.objects.count() == 0 and Conversation.objects.count() == 0


def test_an_intent_without_a_trigger_is_404_naming_the_intent(alice_client):
    for response in (
        alice_client.get("/agents/managed/weather/alice"),
        alice_client.post("/agents/managed/weather/alice", {"input": "hello"}, format="json"),
    ):
        assert response.status_code == 404 and response.json()["code"] == "NOT_FOUND", response.content
        assert "'weather'" in response.json()["detail"]
    assert Conversation.objects.count() == 0 and ManagedConversation.objects.count() == 0


def test_a_mapped_conversation_outlives_its_trigger(support, admin_client, alice_client):
    first = alice_client.get(SUPPORT).json()["conversationId"]
    assert admin_client.delete(f"{TRIGGERS}/support").status_code == 200

    assert alice_client.get(SUPPORT).json()["conversationId"] == first
    alice_client.post(f"{SUPPORT}/endConversation")
    assert alice_client.get(SUPPORT).status_code == 404  # a new one needs the trigger


def test_a_say_body_is_checked_as_the_say_checks_it(support, alice_client):
    response = alice_client.post(SUPPORT, {"input": "hello", "contxt": {}}, format="json")

    assert response.status_code == 400, response.content
    assert [e["field"] for e in response.json()["errors"]] == ["contxt"]
    assert Conversation.objects.count() == 0


def test_a_read_that_starts_a_conversation_counts_as_a_turn(support, alice_client, settings):
    settings.HITL_THROTTLE_TURNS_RATE = "1/min"
    assert alice_client.get(SUPPORT).status_code == 200  # started: the one turn allowed
    assert alice_client.get(SUPPORT).status_code == 200  # read: not counted
    alice_client.post(f"{SUPPORT}/endConversation")

    refused = alice_client.get(SUPPORT)

    assert refused.status_code == 429 and refused.json()["code"] == "THROTTLED", refused.content
    assert int(refused["Retry-After"]) >= 1
    assert Conversation.objects.count() == 1 and Conversation.objects.get().state == "ENDED"


# --- the userId rule -------------------------------------------------------------------------------------

OTHER_USERS_CALLS = [
    ("get", ""),
    ("post", ""),
    ("post", "/endConversation"),
    ("get", "/undo"),
    ("post", "/undo"),
    ("get", "/redo"),
    ("post", "/redo"),
]


@pytest.mark.parametrize("role", ["user", "approver", "staff", "admin"])
@pytest.mark.parametrize(("method", "suffix"), OTHER_USERS_CALLS)
def test_another_users_user_id_is_refused_to_everyone_and_nothing_is_created(support, role, method, suffix):
    bob = make_user("bob")
    bob_conversation = client_for(bob).get("/agents/managed/support/bob").json()["conversationId"]
    caller = client_for(make_user("caller", role))
    body = {"data": {"input": "hello"}, "format": "json"} if (method, suffix) == ("post", "") else {}

    response = getattr(caller, method)(f"/agents/managed/support/bob{suffix}", **body)

    assert response.status_code == 403 and response.json()["code"] == "FORBIDDEN", response.content
    assert "your own user name ('caller')" in response.json()["detail"]
    assert ManagedConversation.objects.count() == 1 and Conversation.objects.count() == 1
    bob_now = Conversation.objects.get(pk=bob_conversation)
    assert (bob_now.state, bob_now.step_count) == ("READY", 1)


def test_a_user_id_naming_nobody_is_refused_before_anything_is_read(alice_client):
    response = alice_client.get("/agents/managed/no-such-intent/nobody")

    assert response.status_code == 403, response.content  # not the 404 of the unknown intent


def test_anonymous_callers_are_401(support, anon_client):
    assert anon_client.get(SUPPORT).status_code == 401
    assert anon_client.get(TRIGGERS).status_code == 401


# --- undo and redo --------------------------------------------------------------------------------------


def test_undo_and_redo_act_on_the_intents_conversation(support, alice_client):
    assert alice_client.get(f"{SUPPORT}/undo").json() is False
    assert alice_client.post(f"{SUPPORT}/undo").status_code == 404
    assert alice_client.post(f"{SUPPORT}/redo").status_code == 404
    alice_client.post(SUPPORT, {"input": "hello"}, format="json")
    assert alice_client.get(f"{SUPPORT}/undo").json() is True
    assert alice_client.get(f"{SUPPORT}/redo").json() is False

    undone = alice_client.post(f"{SUPPORT}/undo")

    assert undone.status_code == 200 and undone.json()["stepCount"] == 1, undone.content
    assert alice_client.get(f"{SUPPORT}/redo").json() is True
    redone = alice_client.post(f"{SUPPORT}/redo")
    assert redone.status_code == 200 and redone.json()["stepCount"] == 2
    assert redone.json()["output"] == ["Hello!"]


def test_undo_while_awaiting_approval_is_409_and_not_available(support, alice_client):
    alice_client.post(SUPPORT, {"input": "please delete my account"}, format="json")

    assert alice_client.get(f"{SUPPORT}/undo").json() is False
    refused = alice_client.post(f"{SUPPORT}/undo")
    assert refused.status_code == 409 and refused.json()["currentState"] == "AWAITING_HUMAN"


def test_undo_of_an_ended_conversation_is_409_not_a_new_conversation(support, alice_client):
    alice_client.get(SUPPORT)
    alice_client.post(f"{SUPPORT}/endConversation")

    assert alice_client.get(f"{SUPPORT}/undo").json() is False
    assert alice_client.post(f"{SUPPORT}/undo").status_code == 409
    assert Conversation.objects.count() == 1


# --- the agent trigger store -----------------------------------------------------------------------------


def test_the_trigger_store_creates_reads_replaces_and_deletes_eddis_configuration(admin_client):
    first, second = deployed_agent(), deployed_agent(account_bot(name="second"))
    body = configuration(first, initialContext={"channel": {"type": "string", "value": "web"}})

    created = admin_client.post(TRIGGERS, body, format="json")

    assert created.status_code == 201, created.content
    assert created["Location"] == f"{TRIGGERS}/support"
    assert created.json() == body
    assert admin_client.get(TRIGGERS).json() == [body]
    assert admin_client.get(f"{TRIGGERS}/support").json() == body

    replaced = admin_client.put(f"{TRIGGERS}/support", configuration(second, intent=None), format="json")

    assert replaced.status_code == 200, replaced.content
    assert admin_client.get(f"{TRIGGERS}/support").json() == configuration(second)
    assert admin_client.delete(f"{TRIGGERS}/support").status_code == 200
    assert admin_client.get(f"{TRIGGERS}/support").status_code == 404
    assert admin_client.delete(f"{TRIGGERS}/support").status_code == 200  # nothing to delete: 200 too


def test_a_deployment_without_environment_or_context_is_stored_with_eddis_defaults(admin_client):
    agent_id = deployed_agent()

    admin_client.post(
        TRIGGERS, {"intent": "support", "agentDeployments": [{"agentId": agent_id}]}, format="json"
    )

    assert admin_client.get(f"{TRIGGERS}/support").json()["agentDeployments"] == [
        {"environment": "production", "agentId": agent_id, "initialContext": {}}
    ]


def test_creating_a_trigger_for_an_intent_that_has_one_is_409(support, admin_client):
    response = admin_client.post(TRIGGERS, configuration(support), format="json")

    assert response.status_code == 409 and response.json()["code"] == "CONFLICT", response.content
    assert AgentTrigger.objects.count() == 1


def test_a_put_whose_intent_is_not_the_paths_is_400_naming_intent(support, admin_client):
    response = admin_client.put(
        f"{TRIGGERS}/support", configuration(support, intent="billing"), format="json"
    )

    assert response.status_code == 400, response.content
    assert [e["field"] for e in response.json()["errors"]] == ["intent"]
    assert admin_client.put(f"{TRIGGERS}/support", configuration(support), format="json").status_code == 200


def test_a_put_of_an_intent_without_a_trigger_is_404(admin_client):
    response = admin_client.put(f"{TRIGGERS}/support", configuration(deployed_agent()), format="json")

    assert response.status_code == 404, response.content
    assert AgentTrigger.objects.count() == 0


def _bad(change: Any) -> Any:
    def body(agent_id: str) -> dict[str, Any]:
        made = configuration(agent_id)
        change(made)
        return made

    return body


BAD_BODIES = [
    ("an unknown field", _bad(lambda b: b.update(userId="alice")), "userId"),
    (
        "an unknown deployment field",
        _bad(lambda b: b["agentDeployments"][0].update(version=2)),
        "agentDeployments[0].version",
    ),
    ("no intent", _bad(lambda b: b.pop("intent")), "intent"),
    ("an intent of other characters", _bad(lambda b: b.update(intent="sup port")), "intent"),
    ("an intent of 101 characters", _bad(lambda b: b.update(intent="i" * 101)), "intent"),
    ("an intent that is not a string", _bad(lambda b: b.update(intent=5)), "intent"),
    ("no deployment", _bad(lambda b: b.update(agentDeployments=[])), "agentDeployments"),
    ("deployments not a list", _bad(lambda b: b.update(agentDeployments={})), "agentDeployments"),
    ("a deployment not an object", _bad(lambda b: b.update(agentDeployments=["x"])), "agentDeployments[0]"),
    (
        "an unknown agent",
        _bad(lambda b: b["agentDeployments"][0].update(agentId="00000000-0000-0000-0000-000000000000")),
        "agentDeployments[0].agentId",
    ),
    (
        "another environment",
        _bad(lambda b: b["agentDeployments"][0].update(environment="unrestricted")),
        "agentDeployments[0].environment",
    ),
    (
        "a context that is not an object",
        _bad(lambda b: b["agentDeployments"][0].update(initialContext=[])),
        "agentDeployments[0].initialContext",
    ),
    (
        "a context entry of an unknown type",
        _bad(
            lambda b: b["agentDeployments"][0].update(initialContext={"k": {"type": "number", "value": "1"}})
        ),
        "agentDeployments[0].initialContext.k.type",
    ),
    (
        "a string entry whose value is not a string",
        _bad(lambda b: b["agentDeployments"][0].update(initialContext={"k": {"type": "string", "value": 1}})),
        "agentDeployments[0].initialContext.k.value",
    ),
    (
        "a context entry with an unknown field",
        _bad(
            lambda b: b["agentDeployments"][0].update(
                initialContext={"k": {"type": "string", "value": "v", "scope": "x"}}
            )
        ),
        "agentDeployments[0].initialContext.k.scope",
    ),
    (
        "a context over the size limit",
        _bad(
            lambda b: b["agentDeployments"][0].update(
                initialContext={"k": {"type": "string", "value": "x" * 70_000}}
            )
        ),
        "agentDeployments[0].initialContext",
    ),
]


@pytest.mark.parametrize(("case", "body", "field"), BAD_BODIES, ids=[c[0] for c in BAD_BODIES])
def test_a_bad_trigger_is_400_naming_the_field_and_nothing_is_stored(admin_client, case, body, field):
    response = admin_client.post(TRIGGERS, body(deployed_agent()), format="json")

    assert response.status_code == 400, response.content
    fields = [e["field"] for e in response.json()["errors"]]
    assert fields == [field], response.json()
    assert AgentTrigger.objects.count() == 0


@pytest.mark.parametrize("role", ["user", "approver", "staff", "agent"])
def test_only_admins_read_and_write_agent_triggers(support, role):
    client = client_for(make_user("caller", role))
    body = configuration(support, intent="billing")

    for response in (
        client.get(TRIGGERS),
        client.post(TRIGGERS, body, format="json"),
        client.get(f"{TRIGGERS}/support"),
        client.put(f"{TRIGGERS}/support", configuration(support), format="json"),
        client.delete(f"{TRIGGERS}/support"),
    ):
        assert response.status_code == 403, response.content
    assert list(AgentTrigger.objects.values_list("intent", flat=True)) == ["support"]


# --- races: real threads, real PostgreSQL ----------------------------------------------------------------

RACERS = 4


def slow_starting_bot(url: str) -> dict[str, Any]:
    """The account bot whose start turn calls a loopback server that answers slowly: without the pair's
    lock, requests racing to start would each be inside a start at the same time."""
    document = account_bot(name="slow-start")
    document["workflows"][0]["tasks"].insert(
        2,
        {
            "id": "warm",
            "type": "httpcalls",
            "targetServerUrl": url,
            "calls": [
                {
                    "name": "warm_up",
                    "actions": ["CONVERSATION_START"],
                    "request": {"method": "GET", "path": "/warm-up"},
                }
            ],
        },
    )
    return document


def race(user: Any, path: str) -> list[Any]:
    """``RACERS`` threads, each with its own connection, read ``path`` at once; their answers."""
    barrier = threading.Barrier(RACERS)
    answers: list[Any] = [None] * RACERS

    def run(index: int) -> None:
        try:
            client: APIClient = client_for(user)
            barrier.wait()
            answers[index] = client.get(path)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


@pytest.fixture
def slow_support(transactional_db, loopback_server) -> Any:
    loopback_server.respond("/warm-up", json_body={"ok": True}, delay_seconds=0.3)
    agent_id = deployed_agent(slow_starting_bot(loopback_server.url))
    created = client_for(make_user("admin", "admin")).post(TRIGGERS, configuration(agent_id), format="json")
    assert created.status_code == 201, created.content
    return loopback_server


def test_first_requests_at_once_start_one_conversation_and_all_act_on_it(slow_support):
    alice = make_user("alice")

    answers = race(alice, SUPPORT)

    assert [a.status_code for a in answers] == [200] * RACERS, [a.content for a in answers]
    assert len({a.json()["conversationId"] for a in answers}) == 1
    assert Conversation.objects.filter(owner=alice).count() == 1
    assert ManagedConversation.objects.filter(user=alice).count() == 1
    assert len(slow_support.received) == 1  # one start turn ran


def test_requests_at_once_after_the_end_replace_the_ended_conversation_once(slow_support):
    alice = make_user("alice")
    first = client_for(alice).get(SUPPORT).json()["conversationId"]
    assert client_for(alice).post(f"{SUPPORT}/endConversation").status_code == 200

    answers = race(alice, SUPPORT)

    assert [a.status_code for a in answers] == [200] * RACERS, [a.content for a in answers]
    replaced = {a.json()["conversationId"] for a in answers}
    assert len(replaced) == 1 and replaced != {first}
    assert mapped("alice") == replaced.pop()
    assert Conversation.objects.filter(owner=alice).count() == 2
    assert len(slow_support.received) == 2  # the first start and one replacement
