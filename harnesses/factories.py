"""Agent documents and shortcuts for building conversations in tests."""

from __future__ import annotations

import copy
import json
from typing import Any
from urllib.parse import urlsplit

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
    document["workflows"][0]["tasks"].insert(
        2,
        {
            "id": "fetch",
            "type": "httpcalls",
            "targetServerUrl": "http://127.0.0.1:9",
            "calls": [
                {"name": "profile", "actions": ["fetch_profile"], "request": {"method": "GET", "path": "/p"}}
            ],
        },
    )
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


def store_tool_batch(
    pause: Any,
    calls: list[dict[str, Any]],
    *,
    executed_ungated: list[str] | None = None,
    outcome_unknown: list[str] | None = None,
    reason: str | None = None,
) -> Any:
    """Turn a pause into a TOOL_CALL pause with the batch the tool gate builds for ``calls``.

    Each call: {callId, toolName, source, arguments (dict), gateReason, matchedRule}; an http call also
    has {request: {method, url, headers, body}}, the request its tool sends. The batch is built by the
    gate's own code (toolgate.loop.build_batch: redaction, rules, pinning, fingerprints; then
    toolgate.batches.store_batch), so an http call is pinned with its real request fingerprint and has
    its real redacted preview, and a call of another source has neither. ``reason`` is the pause reason
    the gate config asks for. ``outcome_unknown`` call ids are claimed in the journal, never recorded.
    """
    from approvals.models import Pause
    from toolgate.batches import store_batch
    from toolgate.journal import claim
    from toolgate.loop import LoopSettings, LoopState, build_batch
    from toolgate.tools import ToolCall, ToolContext, ToolSet

    toolset = ToolSet()
    for call in calls:
        toolset.add(_tool_of(call))
    gated = [
        ToolCall(id=c["callId"], name=c["toolName"], arguments=json.dumps(c.get("arguments", {})))
        for c in calls
    ]
    config: dict[str, Any] = {"rules": [{"match": c["matchedRule"]} for c in calls if c.get("matchedRule")]}
    if reason:
        config["pauseReason"] = reason
    batch = build_batch(
        content=None,
        gated=gated,
        gate_reasons={c["callId"]: c.get("gateReason", "") for c in calls},
        toolset=toolset,
        context=ToolContext(conversation_id=str(pause.subject_id), agent_id=str(pause.agent_id)),
        state=LoopState(messages=[], executed_ungated=list(executed_ungated or [])),
        loop=LoopSettings(
            llm_task_id="assistant", config=config, hitl_config=None, max_iterations=5, user_input=""
        ),
    )
    Pause.objects.filter(pk=pause.pk).update(
        kind="TOOL_CALL", tool_names=batch.tool_names, reason=batch.reason
    )
    pause.refresh_from_db()
    store_batch(pause, batch)
    names = {c["callId"]: c["toolName"] for c in calls}
    for call_id in outcome_unknown or []:
        assert claim(
            conversation_id=pause.subject_id,
            pause_epoch=pause.epoch,
            call_id=call_id,
            tool_name=names.get(call_id, ""),
            decided_by="approver",
        )
    return pause


def _tool_of(call: dict[str, Any]) -> Any:
    """The tool a call is offered as: an http tool built from its request, else a tool of its source."""
    from toolgate.sources.http import http_tool
    from toolgate.tools import Tool

    request = call.get("request")
    if request is None:
        return Tool(
            name=call["toolName"],
            source=call.get("source", "builtin"),
            description="",
            parameters={"type": "object"},
            run=lambda args, context: {"ok": True},
        )
    url = urlsplit(request["url"])
    path = url.path + (f"?{url.query}" if url.query else "")
    return http_tool(
        {"targetServerUrl": f"{url.scheme}://{url.netloc}"},
        {
            "name": call["toolName"],
            "parameters": {"type": "object"},
            "request": {
                "method": request.get("method", "GET"),
                "path": path,
                "headers": request.get("headers") or {},
                "body": request.get("body"),
            },
        },
    )
