"""S5 (b): every size limit the docs state is enforced with a 4xx naming the field.

One row per documented limit: a value just at the limit is accepted, one unit over is refused with a
400 whose body names the field, and the refusal consumed nothing (the pause is still pending, no
conversation step was taken, no agent was stored).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from approvals.models import Pause, PauseStatus
from conversations.agents import create_agent
from conversations.models import Agent, Conversation
from groups.models import Group
from harnesses.agents import payments_agent
from harnesses.factories import account_bot, deployed_agent, paused_conversation, say, start
from harnesses.users import make_user
from tests.approvals.test_admin_inbox import rows

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Limit:
    """``send(clients, size)`` makes the request with a value of ``size`` units and returns the response
    and a check that nothing was consumed (called only on a refusal)."""

    name: str
    field: str
    maximum: int
    send: Callable[[dict[str, Any], int], tuple[Any, Callable[[], bool]]]


def _pending(conversation_id: str) -> Callable[[], bool]:
    return lambda: Pause.objects.filter(subject_id=conversation_id, status=PauseStatus.PENDING).count() == 1


def _resume_note(clients: dict[str, Any], size: int):
    conversation_id = paused_conversation(clients["alice"])
    response = clients["approver"].post(
        f"/agents/{conversation_id}/resume", {"verdict": "APPROVED", "note": "n" * size}, format="json"
    )
    return response, _pending(conversation_id)


def _say_input(clients: dict[str, Any], size: int):
    conversation_id = start(clients["alice"], deployed_agent())

    def step_count() -> int:
        return clients["alice"].get(f"/agents/{conversation_id}").json()["stepCount"]

    before = step_count()
    response = say(clients["alice"], conversation_id, "x" * size)
    return response, lambda: step_count() == before


def context_of(size: int) -> dict[str, str]:
    """A context of exactly ``size`` bytes of canonical JSON (``{"k":"…"}``)."""
    return {"k": "x" * (size - len('{"k":""}'))}


def _start_context(clients: dict[str, Any], size: int):
    agent_id = deployed_agent()
    before = Conversation.objects.count()
    response = clients["alice"].post(
        f"/agents/{agent_id}/start", {"context": context_of(size)}, format="json"
    )
    return response, lambda: Conversation.objects.count() == before


def _say_context(clients: dict[str, Any], size: int):
    conversation_id = start(clients["alice"], deployed_agent())

    def step_count() -> int:
        return clients["alice"].get(f"/agents/{conversation_id}").json()["stepCount"]

    before = step_count()
    response = clients["alice"].post(
        f"/agents/{conversation_id}", {"input": "hello", "context": context_of(size)}, format="json"
    )
    return response, lambda: step_count() == before


def _amended_arguments(clients: dict[str, Any], size: int):
    document = payments_agent(clients["recorder"].url)
    conversation_id = start(clients["alice"], deployed_agent(document))
    assert say(clients["alice"], conversation_id, "transfer now").json()["state"] == "AWAITING_HUMAN"
    frame = json.dumps({"amount": 100, "to": ""})
    amended = json.dumps({"amount": 100, "to": "b" * (size - len(frame))})
    assert len(amended.encode()) == size
    body = {
        "verdict": "APPROVED",
        "toolDecisions": {"call-1": {"verdict": "APPROVED", "amendedArguments": amended}},
    }
    response = clients["approver"].post(f"/agents/{conversation_id}/resume", body, format="json")
    return response, _pending(conversation_id)


def _pause_reason(clients: dict[str, Any], size: int):
    approvals = {"requireApproval": ["transfer_*"], "pauseReason": "r" * size}
    document = payments_agent("http://127.0.0.1:9", tool_approvals=approvals)
    before = Agent.objects.count()
    response = clients["admin"].post("/agentstore/agents", document, format="json")
    return response, lambda: Agent.objects.count() == before


def _call_note(clients: dict[str, Any], size: int):
    document = payments_agent(clients["recorder"].url)
    conversation_id = start(clients["alice"], deployed_agent(document))
    assert say(clients["alice"], conversation_id, "transfer now").json()["state"] == "AWAITING_HUMAN"
    body = {"verdict": "APPROVED", "toolDecisions": {"call-1": {"verdict": "APPROVED", "note": "n" * size}}}
    response = clients["approver"].post(f"/agents/{conversation_id}/resume", body, format="json")
    return response, _pending(conversation_id)


def _group_name(clients: dict[str, Any], size: int):
    members = [str(create_agent(document=account_bot(name=f"member-{n}")).agent_id) for n in range(2)]
    document = {
        "name": "g" * size,
        "members": [{"agentId": member} for member in members],
        "phases": [{"name": "Opinions", "type": "OPINION"}, {"name": "Wrap-up", "type": "SYNTHESIS"}],
    }
    before = Group.objects.count()
    response = clients["admin"].post("/groupstore/groups", document, format="json")
    return response, lambda: Group.objects.count() == before


def _require_pattern(clients: dict[str, Any], size: int):
    document = payments_agent(
        "http://127.0.0.1:9", tool_approvals={"requireApproval": ["t" * (size - 1) + "*"]}
    )
    before = Agent.objects.count()
    response = clients["admin"].post("/agentstore/agents", document, format="json")
    return response, lambda: Agent.objects.count() == before


def _nested(levels: int) -> Any:
    """Tool arguments nested ``levels`` deep (an object or array is one level)."""
    value: Any = []
    for _ in range(levels - 2):
        value = [value]
    return {"amount": 100, "to": "bob", "memo": value}


def _amended_depth(clients: dict[str, Any], levels: int):
    document = payments_agent(clients["recorder"].url)
    conversation_id = start(clients["alice"], deployed_agent(document))
    assert say(clients["alice"], conversation_id, "transfer now").json()["state"] == "AWAITING_HUMAN"
    amended = json.dumps(_nested(levels))
    body = {
        "verdict": "APPROVED",
        "toolDecisions": {"call-1": {"verdict": "APPROVED", "amendedArguments": amended}},
    }
    response = clients["approver"].post(f"/agents/{conversation_id}/resume", body, format="json")
    return response, _pending(conversation_id)


def _secret_value(clients: dict[str, Any], size: int):
    response = clients["admin"].put("/secretstore/secrets/limit.key", {"value": "v" * size}, format="json")
    listed = lambda: [s["name"] for s in clients["admin"].get("/secretstore/secrets").json()]  # noqa: E731
    return response, lambda: "limit.key" not in listed()


def _group(clients: dict[str, Any], *, member: dict[str, Any] | None = None, phase_name: str = "Opinions"):
    members = [str(create_agent(document=account_bot(name=f"member-{n}")).agent_id) for n in range(2)]
    document = {
        "name": "panel",
        "members": [{"agentId": agent_id, **(member or {})} for agent_id in members],
        "phases": [{"name": phase_name, "type": "OPINION"}, {"name": "Wrap-up", "type": "SYNTHESIS"}],
    }
    before = Group.objects.count()
    response = clients["admin"].post("/groupstore/groups", document, format="json")
    return response, lambda: Group.objects.count() == before


def _max_retries(clients: dict[str, Any], count: int):
    document = payments_agent("http://127.0.0.1:9")
    balance = document["workflows"][0]["tasks"][1]["calls"][1]
    balance["postResponse"] = {
        "retryApiCallInstruction": {"maxRetries": count, "exponentialBackoffDelayInMillis": 0}
    }
    before = Agent.objects.count()
    response = clients["admin"].post("/agentstore/agents", document, format="json")
    return response, lambda: Agent.objects.count() == before


def _bulk_selection(clients: dict[str, Any], count: int):
    """The admin's bulk decision: ``count`` rule pauses selected in the inbox (admin-inbox.md); at the limit
    the confirmation page lists them all, over it a 400 offers nothing to confirm."""
    pauses = rows(make_user("owner-of-many"), count)
    reviewer = Client()
    reviewer.force_login(make_user("bulk-reviewer", "approver"))
    selected = [str(p.pk) for p in pauses]
    response = reviewer.post(
        "/admin/approvals/pendingapproval/",
        {"action": "approve_selected", "_selected_action": selected, "index": "0"},
    )
    if response.status_code == 200:
        assert f"Approve {count} rule pause(s)?" in response.content.decode()
    still_pending = lambda: Pause.objects.filter(status=PauseStatus.PENDING).count() == count  # noqa: E731
    return response, still_pending


LIMITS = [
    Limit("resume note (rest-api.md: ≤ 4096 characters)", "note", 4096, _resume_note),
    Limit("say input (rest-api.md: at most 16,384 characters)", "input", 16_384, _say_input),
    Limit("start context (rest-api.md: at most 65,536 bytes of JSON)", "context", 65_536, _start_context),
    Limit("say context (rest-api.md: at most 65,536 bytes of JSON)", "context", 65_536, _say_context),
    Limit(
        "amendedArguments (tool-gating.md: at most 32 KiB)", "amendedArguments", 32_768, _amended_arguments
    ),
    Limit("tool approval pattern (tool-gating.md: 256 characters)", "requireApproval", 256, _require_pattern),
    Limit("pauseReason (tool-gating.md: ≤ 500 characters)", "pauseReason", 500, _pause_reason),
    Limit("per-call note (tool-gating.md: ≤ 1024)", "toolDecisions", 1024, _call_note),
    Limit("group name (groups.md: at most 200 characters)", "name", 200, _group_name),
    Limit("secret value (secrets.md: at most 64 KiB)", "value", 65_536, _secret_value),
    Limit(
        "member role (groups.md: at most 200 characters)",
        "role",
        200,
        lambda clients, size: _group(clients, member={"role": "r" * size}),
    ),
    Limit(
        "member displayName (groups.md: at most 200 characters)",
        "displayName",
        200,
        lambda clients, size: _group(clients, member={"displayName": "d" * size}),
    ),
    Limit(
        "phase name (groups.md: at most 200 characters)",
        "phases",
        200,
        lambda clients, size: _group(clients, phase_name="p" * size),
    ),
    Limit("maxRetries (rest-api.md: 0..10)", "maxRetries", 10, _max_retries),
    Limit("amendedArguments nesting (tool-gating.md: 64 levels)", "amendedArguments", 64, _amended_depth),
    Limit("admin bulk decision (admin-inbox.md: at most 100 pauses)", "pause_ids", 100, _bulk_selection),
]


@pytest.fixture
def clients(alice_client, approver_client, admin_client, http_recorder) -> dict[str, Any]:
    return {
        "alice": alice_client,
        "approver": approver_client,
        "admin": admin_client,
        "recorder": http_recorder,
    }


def _ids(limit: Limit) -> str:
    return limit.name.split(" (")[0].replace(" ", "-")


@pytest.mark.parametrize("limit", LIMITS, ids=_ids)
def test_a_value_at_the_documented_limit_is_accepted(limit: Limit, clients):
    response, _ = limit.send(clients, limit.maximum)
    assert response.status_code in (200, 201), response.content[:400]


@pytest.mark.parametrize("limit", LIMITS, ids=_ids)
def test_one_over_the_documented_limit_is_refused_naming_the_field_and_consumes_nothing(
    limit: Limit, clients
):
    response, nothing_consumed = limit.send(clients, limit.maximum + 1)
    assert response.status_code in (400, 413), response.content[:400]
    assert limit.field in response.content.decode(), response.content[:400]
    assert nothing_consumed()


@pytest.mark.parametrize("limit", ["0", "1001", "999999999999"])
def test_list_limits_are_clamped_not_refused_as_documented(limit: str, approver_client):
    """Limits are clamped to 1..1000, not refused (docs/groups.md) — the one documented bound without a 4xx."""
    paused_conversation(approver_client)
    response = approver_client.get(f"/agents/pending-approvals?limit={limit}")
    assert response.status_code == 200
    assert 1 <= len(response.json()) <= 1000
