"""The caps on pending pauses (approvals/pause_caps.py, docs/operations.md "Throttles and caps"): a turn
that could pause is refused with 409 LIMIT_REACHED, naming the setting and its value, before anything is
written, while its owner or its agent is at the cap; nobody else is affected."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from approvals.models import AuditEntry, Pause, PauseStatus
from approvals.pause_caps import counted_pending_pauses
from conversations.models import Conversation, ConversationStep
from groups.models import GroupConversation
from harnesses.factories import deployed_agent, say, start
from harnesses.members import PHASES, answering, approve, discuss, group
from mcp_surface import conversation_tools
from mcp_surface.server import _call

pytestmark = pytest.mark.django_db

PER_USER, PER_AGENT = "HITL_MAX_OPEN_PAUSES_PER_USER", "HITL_MAX_OPEN_PAUSES_PER_AGENT"
DELETE = "please delete my account"  # the account bot pauses on it


def pending(
    owner: User | None,
    count: int,
    *,
    surface: str = "regular",
    agent_id: Any = None,
    status: str = PauseStatus.PENDING,
) -> None:
    """``count`` pending pauses of ``owner`` (rows only), 1:1 ones or group ones."""
    group = surface == "group"
    Pause.objects.bulk_create(
        [
            Pause(
                surface=surface,
                kind="PHASE" if group else "RULE",
                subject_type="discussion" if group else "conversation",
                subject_id=uuid.uuid4(),
                group_id=uuid.uuid4() if group else None,
                agent_id=agent_id,
                owner=owner,
                reason="waiting",
                status=status,
                paused_at=timezone.now(),
            )
            for _ in range(count)
        ]
    )


def written() -> tuple[int, ...]:
    return (
        Conversation.objects.count(),
        ConversationStep.objects.count(),
        Pause.objects.count(),
        GroupConversation.objects.count(),
        AuditEntry.objects.count(),
    )


def assert_limit_reached(response: Any, setting: str, limit: int) -> dict[str, Any]:
    assert response.status_code == 409, response.content
    assert response["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert (body["code"], body["title"], body["setting"], body["limit"]) == (
        "LIMIT_REACHED",
        "Limit reached",
        setting,
        limit,
    ), body
    assert f"{setting}={limit}" in body["detail"]
    return body


@pytest.fixture
def capped(settings):
    settings.HITL_MAX_OPEN_PAUSES_PER_USER = 3
    settings.HITL_MAX_OPEN_PAUSES_PER_AGENT = 0
    return settings


def test_a_user_at_the_open_pause_cap_cannot_start_and_nothing_is_written(capped, alice, alice_client):
    agent_id = deployed_agent()
    pending(alice, 3)
    before = written()

    assert_limit_reached(alice_client.post(f"/agents/{agent_id}/start", format="json"), PER_USER, 3)

    assert written() == before


def test_a_user_at_the_open_pause_cap_cannot_say_and_the_input_is_not_consumed(capped, alice, alice_client):
    conversation_id = start(alice_client, deployed_agent())
    pending(alice, 3)
    before = written()

    body = assert_limit_reached(say(alice_client, conversation_id, DELETE), PER_USER, 3)

    assert body["detail"].startswith("You already have 3 pending approvals")
    assert written() == before
    snapshot = alice_client.get(f"/agents/{conversation_id}").json()
    assert (snapshot["state"], [step["input"] for step in snapshot["steps"]]) == ("READY", [""])


def test_group_pauses_count_towards_the_same_cap_as_1to1_pauses(capped, alice, alice_client):
    agent_id = deployed_agent()
    pending(alice, 2)
    pending(alice, 1, surface="group")

    assert_limit_reached(alice_client.post(f"/agents/{agent_id}/start", format="json"), PER_USER, 3)


def test_a_user_under_the_cap_may_still_pause_and_decided_pauses_do_not_count(capped, alice, alice_client):
    pending(alice, 2)
    Pause.objects.bulk_create(
        [
            Pause(
                surface="regular",
                kind="RULE",
                subject_type="conversation",
                subject_id=uuid.uuid4(),
                owner=alice,
                reason="done",
                status=status,
                paused_at=timezone.now(),
            )
            for status in (PauseStatus.RESOLVED, PauseStatus.CANCELLED, PauseStatus.RESOLVED)
        ]
    )
    conversation_id = start(alice_client, deployed_agent())

    assert say(alice_client, conversation_id, DELETE).json()["state"] == "AWAITING_HUMAN"  # the third
    assert_limit_reached(alice_client.post(f"/agents/{deployed_agent()}/start", format="json"), PER_USER, 3)


def test_another_user_is_not_affected_by_someone_at_the_cap(capped, alice, bob_client):
    agent_id = deployed_agent()
    pending(alice, 3)

    conversation_id = start(bob_client, agent_id)
    assert say(bob_client, conversation_id, DELETE).json()["state"] == "AWAITING_HUMAN"


def test_an_admin_talking_in_a_conversation_counts_its_owners_pauses(
    capped, alice, alice_client, admin_client
):
    conversation_id = start(alice_client, deployed_agent())
    pending(alice, 3)

    body = assert_limit_reached(say(admin_client, conversation_id, DELETE), PER_USER, 3)

    assert body["detail"].startswith("The conversation's owner already has 3 pending approvals")


def test_an_agent_at_its_open_pause_cap_takes_no_new_turn_from_anyone(settings, alice, alice_client, bob):
    settings.HITL_MAX_OPEN_PAUSES_PER_USER = 100
    settings.HITL_MAX_OPEN_PAUSES_PER_AGENT = 2
    agent_id, other_agent = deployed_agent(), deployed_agent()
    conversation_id = start(alice_client, agent_id)  # before the agent reached its cap
    pending(bob, 2, agent_id=agent_id)
    before = written()

    body = assert_limit_reached(alice_client.post(f"/agents/{agent_id}/start", format="json"), PER_AGENT, 2)
    said = assert_limit_reached(say(alice_client, conversation_id, DELETE), PER_AGENT, 2)

    assert body["detail"].startswith(f"Agent {agent_id} already has 2 pending approvals")
    assert said["detail"].startswith(f"Agent {agent_id} already has 2 pending approvals")
    assert written() == before
    assert alice_client.post(f"/agents/{other_agent}/start", format="json").status_code == 201


def test_a_cap_of_0_is_no_cap(settings, alice, alice_client):
    settings.HITL_MAX_OPEN_PAUSES_PER_USER = 0
    settings.HITL_MAX_OPEN_PAUSES_PER_AGENT = 0
    agent_id = deployed_agent()
    pending(alice, 5, agent_id=agent_id)

    conversation_id = start(alice_client, agent_id)
    assert say(alice_client, conversation_id, DELETE).json()["state"] == "AWAITING_HUMAN"


def test_a_user_at_the_cap_cannot_start_a_group_discussion_streamed_or_not(capped, alice, alice_client):
    group_id = group([(answering("pat", "Ship it."), "Optimist")], PHASES)
    pending(alice, 3)
    before = written()

    plain = alice_client.post(f"/groups/{group_id}/conversations", {"question": "Ship?"}, format="json")
    streamed = alice_client.post(
        f"/groups/{group_id}/conversations/stream",
        {"question": "Ship?"},
        format="json",
        HTTP_ACCEPT="text/event-stream",
    )

    assert_limit_reached(plain, PER_USER, 3)
    assert_limit_reached(streamed, PER_USER, 3)  # before the stream starts, as an HTTP answer
    assert written() == before


def test_the_member_turns_of_a_discussion_are_not_refused_when_its_owner_is_at_the_cap(
    settings, alice, alice_client, approver_client
):
    """A member's own pause never stays open; the discussion's start was checked. So approving the gate of
    a discussion whose owner reached the cap meanwhile runs its remaining member turns."""
    settings.HITL_MAX_OPEN_PAUSES_PER_USER = 2
    group_id = group(
        [(answering("pat", "Ship it."), "Optimist"), (answering("sam", "Wait."), "Skeptic")], PHASES
    )
    paused = discuss(alice_client, group_id)
    assert paused["state"] == "AWAITING_APPROVAL"
    pending(alice, 2)  # at the cap even once the gate's own pause is decided

    resumed = approve(approver_client, paused)

    assert resumed["state"] == "COMPLETED", resumed
    decision = [entry for entry in resumed["transcript"] if entry["phase"] == "Decision"]
    assert [entry["status"] for entry in decision] == ["OK", "OK"], decision


@pytest.fixture
def mcp_in_test_transaction(monkeypatch):
    monkeypatch.setattr("mcp_surface.server.close_old_connections", lambda: None)


def test_the_mcp_talk_tools_are_refused_at_the_cap_and_write_nothing(
    capped, alice, alice_client, mcp_in_test_transaction
):
    agent_id = deployed_agent()
    conversation_id = start(alice_client, agent_id)
    pending(alice, 3)
    before = written()

    answers = [
        _call(conversation_tools.talk_to_agent, alice, {"agent_id": agent_id, "message": DELETE}),
        _call(
            conversation_tools.talk_to_agent, alice, {"conversation_id": conversation_id, "message": DELETE}
        ),
    ]

    for answer in answers:
        assert answer.is_error
        refusal = answer.structured_content
        assert refusal["errorCode"] == "WRONG_STATE", refusal  # a surface's own 409, as EDDI maps it
        assert (refusal["details"]["code"], refusal["details"]["setting"], refusal["details"]["limit"]) == (
            "LIMIT_REACHED",
            PER_USER,
            3,
        )
    assert written() == before


def test_a_nested_agent_talk_at_the_cap_is_not_executed(capped, alice):
    from conversations import turns
    from conversations.nested_agents import talk_to_agent

    pending(alice, 3)
    before = written()

    result = talk_to_agent(
        say=turns.say,
        start_conversation=turns.start_conversation,
        caller_username="alice",
        parent_conversation_id=str(uuid.uuid4()),
        message=DELETE,
        agent_id=deployed_agent(),
    )

    assert result["status"] == "NOT_EXECUTED" and PER_USER in result["reason"], result
    assert written() == before


def test_the_cap_is_counted_on_an_index_and_stops_at_the_cap(alice):
    """The count reads an index of pending pauses, never the table, and stops at ``cap`` however many the
    user or the agent has, among everybody else's pending and decided ones. (Which index is the planner's
    choice; on a fresh database at 100,000 pending pauses it is pause_pending_owner_inbox and
    pause_pending_agent: docs/performance.md.)"""
    agent_id = uuid.uuid4()
    others = User.objects.bulk_create([User(username=f"user{i}") for i in range(200)])
    for other in others:
        pending(other, 20, agent_id=agent_id if other.pk % 4 == 0 else uuid.uuid4())
        pending(other, 100, status=PauseStatus.RESOLVED)
    pending(alice, 300, agent_id=agent_id)
    pending(alice, 3000, status=PauseStatus.RESOLVED)  # a history the count must not read through
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE approvals_pause")

    by_owner = counted_pending_pauses(cap=100, owner_id=alice.pk).explain(analyze=True)
    by_agent = counted_pending_pauses(cap=1000, agent_id=agent_id).explain(analyze=True)

    assert "Seq Scan" not in by_owner and "Seq Scan" not in by_agent, (by_owner, by_agent)
    assert "actual time" in by_owner and "rows=100 loops" in by_owner.splitlines()[0], by_owner
    assert "rows=1000 loops" in by_agent.splitlines()[0], by_agent
    assert counted_pending_pauses(cap=100, owner_id=alice.pk).count() == 100
