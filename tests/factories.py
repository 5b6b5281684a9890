"""Agent documents and shortcuts for building conversations in tests."""

from __future__ import annotations

import copy
from typing import Any

from conversations.agents import create_agent, deploy_agent
from conversations.demo_agent import demo_agent_document


def _account_bot() -> dict[str, Any]:
    """The demo agent (conversations.demo_agent) as the tests use it: a short greeting, and who may decide
    its pauses left to HITL_ALLOW_SELF_APPROVAL, so a test's requester may decide her own pause."""
    document = demo_agent_document()
    del document["hitlConfig"]["allowSelfApproval"]
    outputs = document["workflows"][0]["tasks"][2]["outputs"]
    next(output for output in outputs if output["action"] == "say_hello")["texts"] = ["Hello!"]
    return document


ACCOUNT_BOT: dict[str, Any] = _account_bot()


def account_bot(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(ACCOUNT_BOT)
    document.update(changes)
    return document


def slow_account_bot(**changes: Any) -> dict[str, Any]:
    """The account bot with an ``httpcalls`` task its rules never trigger: not all of its tasks are local,
    so its turns and continuations take the path of slow ones (committed claim, lease, queued)."""
    document = account_bot(**changes)
    document["workflows"][0]["tasks"].insert(2, {
        "id": "fetch", "type": "httpcalls", "targetServerUrl": "http://127.0.0.1:9",
        "calls": [{"name": "profile", "actions": ["fetch_profile"], "request": {"method": "GET", "path": "/p"}}]})
    return document


def deployed_agent(document: dict[str, Any] | None = None, *, environment: str = "production") -> str:
    row = create_agent(document=document or account_bot(), created_by=None)
    deploy_agent(agent_id=row.agent_id, version=row.version, environment=environment)
    return str(row.agent_id)


def start(client: Any, agent_id: str, environment: str = "production") -> str:
    response = client.post(f"/agents/{agent_id}/start?environment={environment}", format="json")
    assert response.status_code == 201, response.content
    return response.json()["conversationId"]


def say(client: Any, conversation_id: str, text: str) -> Any:
    return client.post(f"/agents/{conversation_id}", {"input": text}, format="json")


def paused_conversation(client: Any, agent_id: str | None = None) -> str:
    conversation_id = start(client, agent_id or deployed_agent())
    response = say(client, conversation_id, "please delete my account")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "AWAITING_HUMAN"
    return conversation_id


def store_tool_batch(pause: Any, calls: list[dict[str, Any]], *, executed_ungated: list[str] | None = None,
                     outcome_unknown: list[str] | None = None, reason: str | None = None) -> Any:
    """Turn a pause into a TOOL_CALL pause with a stored batch, as the tool gate leaves it.

    Each call: {callId, toolName, source, arguments (dict), gateReason, matchedRule, pinned, preview}.
    ``outcome_unknown`` call ids get an EXECUTING journal entry (claimed, never recorded).
    """
    import hashlib
    import json

    from approvals.models import Pause
    from toolgate.models import JournalEntry, PendingToolBatch, PendingToolCall

    Pause.objects.filter(pk=pause.pk).update(
        kind="TOOL_CALL", tool_names=[c["toolName"] for c in calls], **({"reason": reason} if reason else {}))
    pause.refresh_from_db()
    batch = PendingToolBatch.objects.create(
        pause=pause, conversation_id=pause.subject_id, llm_task_id="assistant", llm_task_index=0,
        workflow_id="main", transcript=[], executed_ungated_calls=executed_ungated or [],
        fingerprint=hashlib.sha256(json.dumps(calls, sort_keys=True).encode()).hexdigest(),
    )
    for position, call in enumerate(calls):
        arguments = json.dumps(call.get("arguments", {}))
        PendingToolCall.objects.create(
            batch=batch, position=position, call_id=call["callId"], tool_name=call["toolName"],
            source=call.get("source", "http"), arguments_raw=arguments, arguments_redacted=arguments,
            args_truncated=bool(call.get("argsTruncated")), gate_reason=call.get("gateReason", ""),
            matched_rule=call.get("matchedRule", ""),
            request_fingerprint="f" * 64 if call.get("pinned") else "", request_preview=call.get("preview"),
        )
    for call_id in outcome_unknown or []:
        JournalEntry.objects.create(conversation_id=pause.subject_id, pause_epoch=pause.epoch, call_id=call_id,
                                    tool_name="charge_card", claimed_at=pause.paused_at)
    return pause
