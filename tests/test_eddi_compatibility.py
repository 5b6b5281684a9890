"""A client written for EDDI's human-in-the-loop API works here: its paths, bodies, field names and
authentication, each beside ours (docs/eddi-compatibility.md). Real PostgreSQL, the REST API through
DRF's test client with the header EDDI's clients send, the MCP gate over httpx's ASGI transport."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from approvals import metrics
from harnesses.factories import paused_conversation
from harnesses.users import client_for, make_user
from mcp_surface.identity import TokenRequired

pytestmark = pytest.mark.django_db


def bearer(user) -> APIClient:
    """A client that authenticates as EDDI's clients do: ``Authorization: Bearer <token>``."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {Token.objects.get_or_create(user=user)[0].key}")
    return client


def test_a_bearer_token_is_accepted_beside_token(alice, approver):
    conversation_id = paused_conversation(bearer(alice))
    assert bearer(alice).get(f"/agents/{conversation_id}").status_code == 200
    assert client_for(alice).get(f"/agents/{conversation_id}").status_code == 200  # ours, unchanged
    refused = APIClient()
    refused.credentials(HTTP_AUTHORIZATION="Bearer not-a-token")
    assert refused.get(f"/agents/{conversation_id}").status_code == 401
    lower = APIClient()
    lower.credentials(HTTP_AUTHORIZATION=f"bearer {Token.objects.get(user=alice).key}")
    assert lower.get(f"/agents/{conversation_id}").status_code == 200
    assert (
        bearer(approver)
        .post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
        .status_code
        == 200
    )


def test_mcp_takes_a_bearer_token_too(transactional_db):
    user = make_user("mcp-user")
    key = Token.objects.get_or_create(user=user)[0].key

    async def status(authorization: str) -> tuple[int, bool]:
        reached = []

        async def behind(scope, receive, send) -> None:
            reached.append(scope)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        transport = httpx.ASGITransport(app=TokenRequired(behind))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            response = await client.post("/mcp", json={}, headers={"Authorization": authorization})
        return response.status_code, bool(reached)

    assert asyncio.run(status(f"Bearer {key}")) == (200, True)
    assert asyncio.run(status(f"Token {key}")) == (200, True)
    assert asyncio.run(status("Bearer wrong"))[0] == 401


def test_the_snapshot_carries_conversation_state_beside_state(alice):
    conversation_id = paused_conversation(client_for(alice))
    snapshot = client_for(alice).get(f"/agents/{conversation_id}").json()
    assert snapshot["state"] == snapshot["conversationState"] == "AWAITING_HUMAN"


def test_inbox_rows_carry_user_id_beside_owner_id(alice, approver):
    paused_conversation(client_for(alice))
    (row,) = client_for(approver).get("/agents/pending-approvals").json()
    assert row["ownerId"] == row["userId"] == "alice"


def test_the_operator_canary_takes_duration_ms_as_the_manager_sends_it(admin_user):
    def observed() -> float:
        samples = metrics.meters().canary_duration.collect()[0].samples
        return next(sample.value for sample in samples if sample.name.endswith("_sum"))

    sum_before = observed()
    client = client_for(admin_user)
    answered = client.post(
        "/administration/operator/canary-result", {"outcome": "pass", "durationMs": 1500}, format="json"
    )
    assert answered.status_code == 204, answered.content
    assert observed() == pytest.approx(sum_before + 1.5)  # 1500 ms observed as 1.5 s
    both = client.post(
        "/administration/operator/canary-result",
        {"outcome": "pass", "durationMs": 9000, "durationSeconds": 2},
        format="json",
    )
    assert both.status_code == 204 and observed() == pytest.approx(sum_before + 3.5)  # ours wins
    unknown = client.post(
        "/administration/operator/canary-result", {"outcome": "pass", "durationMinutes": 1}, format="json"
    )
    assert unknown.status_code == 400  # anything else is still refused


def _samples(text: str, name: str) -> dict[str, float]:
    """The samples of ``name`` in Prometheus text: labels -> value."""
    found = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            labels, _, value = line.rpartition(" ")
            found[labels[len(name) :]] = float(value)
    return found


def test_the_metrics_are_served_under_eddis_names_at_its_path(
    alice, anon_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):  # a pause is counted once it commits
        paused_conversation(client_for(alice))
    ours = anon_client.get("/metrics").content.decode()
    eddis = anon_client.get("/q/metrics")
    assert eddis.status_code == 200 and eddis["Content-Type"].startswith("text/plain")
    text = eddis.content.decode()
    pauses = _samples(text, "eddi_hitl_pause_count_total")
    assert pauses and pauses == _samples(ours, "hitl_pauses_total")  # the same samples, renamed
    assert pauses['{surface="regular"}'] >= 1
    assert _samples(text, "eddi_operator_gate_verified") == _samples(ours, "hitl_operator_gate_verified")
    assert "hitl_pauses_total" not in text and "http_requests_total" not in text  # ours stay at /metrics


def test_mcp_approve_group_phase_takes_task_approvals_as_a_json_string(alice, approver, monkeypatch):
    import json

    from groups.models import GroupConversation
    from mcp_surface import group_tools
    from mcp_surface.server import _call
    from tests.groups.test_admin_group_pages import task_discussion

    monkeypatch.setattr("mcp_surface.server.close_old_connections", lambda: None)
    body = task_discussion(alice, on_rejection="FAIL")
    ids = {"group_id": body["groupId"], "conversation_id": body["discussionId"]}

    def approve(**arguments):
        result = _call(group_tools.approve_group_phase, approver, {**ids, "verdict": "APPROVED", **arguments})
        return result.is_error, json.loads(result.content[0].text)

    is_error, refused = approve(task_approvals_json="[1, 2]")
    assert is_error and refused["errorCode"] == "BAD_REQUEST"
    assert refused["details"]["errors"][0]["field"] == "taskApprovalsJson"
    is_error, refused = approve(task_approvals_json="{}", task_approvals={})
    assert is_error and "not both" in refused["details"]["errors"][0]["message"]

    is_error, resumed = approve(task_approvals_json=json.dumps({"a": "APPROVED", "b": "REJECTED"}))
    assert not is_error, resumed
    tasks = {
        task["id"]: task["status"] for task in GroupConversation.objects.get(pk=body["discussionId"]).tasks
    }
    assert tasks == {"a": "COMPLETED", "b": "FAILED"}


def test_the_group_approval_status_carries_eddis_names_beside_ours(alice, approver):
    from tests.groups.test_admin_group_pages import task_discussion

    body = task_discussion(alice)
    status = (
        client_for(approver)
        .get(f"/groups/{body['groupId']}/conversations/{body['discussionId']}/approval-status")
        .json()
    )
    assert status["groupConversationId"] == status["discussionId"] == body["discussionId"]
    assert status["pausedPhaseName"] == status["phaseName"] == "Build"
    assert status["pauseReason"] == status["reason"] == "Requires human approval (TASK) — phase: Build"
    assert status["awaitingApprovalTaskIds"] == status["awaitingTaskIds"] == ["a", "b"]


# --- what detail=full, approve and cancel answer -------------------------------------------------------


def test_the_1to1_full_status_carries_eddis_snapshot_with_the_pending_tool_calls_sanitized(alice, approver):
    from approvals.models import Pause, SubjectType
    from harnesses.factories import store_tool_batch

    conversation_id = paused_conversation(client_for(alice))
    pause = Pause.objects.get(subject_type=SubjectType.CONVERSATION, subject_id=conversation_id)
    secret = "sk-live-0123456789abcdef0123456789abcdef"
    store_tool_batch(
        pause,
        [
            {
                "callId": "c1",
                "toolName": "transfer_funds",
                "source": "http",
                "arguments": {"amount": 10, "apiKey": secret},
                "gateReason": "transfer_funds",
                "request": {
                    "method": "POST",
                    "url": "https://bank.test/v1/transfers",
                    "body": '{"amount": 10}',
                },
            }
        ],
    )

    full = bearer(approver).get(f"/agents/{conversation_id}/approval-status?detail=full")

    assert full.status_code == 200, full.content
    body = full.json()
    assert body["conversation"]["conversationId"] == conversation_id  # ours, unchanged
    assert body["conversationState"] == body["state"] == "AWAITING_HUMAN"
    assert body["userId"] == alice.username and body["agentId"] == body["conversation"]["agentId"]
    assert body["conversationOutputs"][-1]["input"] == "please delete my account"
    assert all(item["type"] == "text" for item in body["conversationOutputs"][-1]["output"])
    assert body["hitlPauseType"] == "TOOL_CALL" and body["hitlPauseReason"] == body["pauseReason"]
    assert body["hitlPausedAt"] == body["pausedAt"]
    batch = body["hitlPendingToolCalls"]
    assert "chatTranscriptJson" not in batch and "traceSoFar" not in batch  # EDDI: null; here: absent
    (call,) = batch["calls"]
    assert call["callId"] == "c1" and call["toolName"] == "transfer_funds"
    assert "argumentsRaw" not in call and call["requestFingerprint"] == "<REDACTED>"
    assert call["requestPinned"] is True
    assert secret not in json.dumps(batch)  # EDDI's sanitized view, even for the reviewer


def test_the_1to1_full_status_of_a_conversation_not_paused_has_an_empty_bookmark(alice):
    conversation_id = paused_conversation(client_for(alice))
    client_for(alice).post(f"/agents/{conversation_id}/cancel")

    body = bearer(alice).get(f"/agents/{conversation_id}/approval-status?detail=full").json()

    assert body["conversationState"] == "EXECUTION_INTERRUPTED"
    assert body["hitlPausedAt"] is None and body["hitlPendingToolCalls"] is None


def test_the_group_full_status_is_eddis_group_conversation_beside_the_summary(alice, approver):
    from tests.groups.test_admin_group_pages import task_discussion

    body = task_discussion(alice)
    path = f"/groups/{body['groupId']}/conversations/{body['discussionId']}"

    full = bearer(approver).get(f"{path}/approval-status?detail=full").json()

    assert full["discussion"]["discussionId"] == body["discussionId"]  # ours, unchanged
    assert full["id"] == full["groupConversationId"] == body["discussionId"]
    assert full["originalQuestion"] == "Draft the release notes" and full["userId"] == alice.username
    assert full["hitlPauseType"] == "TASK" and full["pausedAtPhaseIndex"] == 1
    assert full["pausedPhaseName"] == "Build" and full["hitlPauseReason"] == full["pauseReason"]
    assert [t["id"] for t in full["taskList"]["tasks"]] == ["a", "b"]
    assert full["taskList"]["tasks"][0]["assignedAgentId"] == body["tasks"][0]["assignee"]
    entry = full["transcript"][0]
    assert entry["speakerAgentId"] == entry["member"] and entry["phaseName"] == entry["phase"] == "Ideas"
    assert entry["type"] == "OPINION" and entry["errorReason"] is None


def test_approve_and_cancel_answer_the_group_conversation_under_eddis_names(alice, approver):
    from tests.groups.test_admin_group_pages import phase_discussion

    paused, other = phase_discussion(alice), phase_discussion(alice)
    path = f"/groups/{paused['groupId']}/conversations/{paused['discussionId']}"

    approved = bearer(approver).post(
        f"{path}/approve?wait=60", {"decision": {"verdict": "APPROVED"}}, format="json"
    )
    cancelled = bearer(alice).post(f"/groups/{other['groupId']}/conversations/{other['discussionId']}/cancel")

    assert approved.status_code == 200, approved.content
    done = approved.json()
    assert done["id"] == done["discussionId"] and done["state"] == "COMPLETED"
    assert done["synthesizedAnswer"] == done["transcript"][-1]["content"]
    assert done["pausedAtPhaseIndex"] == -1 and done["hitlPauseType"] is None
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "CANCELLED"
    assert cancelled.json()["originalQuestion"] == other["question"]


# --- status codes a client branches on --------------------------------------------------------------


def test_group_approve_answers_once_decided_and_the_continuation_runs_on_the_q_cluster(alice, approver):
    from groups.models import GroupConversation
    from harnesses.queue_drain import run_queued_tasks
    from tests.groups.test_admin_group_pages import phase_discussion

    paused = phase_discussion(alice)
    path = f"/groups/{paused['groupId']}/conversations/{paused['discussionId']}"

    answered = bearer(approver).post(f"{path}/approve", {"decision": {"verdict": "APPROVED"}}, format="json")

    assert answered.status_code == 200, answered.content
    assert answered.json()["state"] == "IN_PROGRESS"  # decided; no member turn ran in the request
    assert [e["phase"] for e in answered.json()["transcript"]] == ["Opinions"]
    assert run_queued_tasks() >= 1
    assert GroupConversation.objects.get(pk=paused["discussionId"]).state == "COMPLETED"


def test_group_drift_without_wait_is_a_200_and_the_pause_comes_back_with_an_error_entry(alice, approver):
    import copy

    from approvals.models import Pause, PauseStatus, SubjectType
    from groups.models import GroupConversation, GroupVersion
    from groups.store import update_group
    from harnesses.queue_drain import run_queued_tasks
    from tests.groups.test_admin_group_pages import phase_discussion

    paused = phase_discussion(alice)
    renamed = copy.deepcopy(GroupVersion.objects.get(group_id=paused["groupId"]).document)
    renamed["phases"][0]["name"] = "Views"
    update_group(group_id=paused["groupId"], document=renamed)
    path = f"/groups/{paused['groupId']}/conversations/{paused['discussionId']}"

    answered = bearer(approver).post(f"{path}/approve", {"decision": {"verdict": "APPROVED"}}, format="json")
    run_queued_tasks()

    assert answered.status_code == 200, answered.content
    discussion = GroupConversation.objects.get(pk=paused["discussionId"])
    assert discussion.state == "AWAITING_APPROVAL" and discussion.transcript[-1]["status"] == "ERROR"
    assert "Resume aborted" in discussion.transcript[-1]["note"]
    pause = Pause.objects.filter(subject_type=SubjectType.DISCUSSION, subject_id=paused["discussionId"]).get()
    assert pause.status == PauseStatus.PENDING
    waited = bearer(approver).post(
        f"{path}/approve?wait=60", {"decision": {"verdict": "APPROVED"}}, format="json"
    )
    assert waited.status_code == 409 and waited.json()["code"] == "RESUME_NOT_STARTED"


# --- the group discussions EDDI lists and deletes ----------------------------------------------------


def test_a_group_lists_its_discussions_newest_first_to_their_owner(alice, approver):
    from tests.groups.test_admin_group_pages import phase_discussion

    first = phase_discussion(alice)
    listed = bearer(alice).get(f"/groups/{first['groupId']}/conversations?index=0&limit=5")

    assert listed.status_code == 200
    assert [d["id"] for d in listed.json()] == [first["discussionId"]]
    assert bearer(approver).get(f"/groups/{first['groupId']}/conversations").json() == []  # not theirs
    refused = bearer(alice).get(f"/groups/{first['groupId']}/conversations?limit=many")
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "limit"


def test_deleting_a_paused_discussion_cancels_its_pause_audited_and_removes_it_and_its_members(
    alice, approver, admin_user
):
    from approvals.models import AuditEntry, Pause, PauseStatus, SubjectType
    from conversations.models import Conversation
    from groups.models import GroupConversation
    from tests.groups.test_admin_group_pages import phase_discussion

    paused = phase_discussion(alice)
    discussion = GroupConversation.objects.get(pk=paused["discussionId"])
    members = list(discussion.member_conversations.values())
    path = f"/groups/{paused['groupId']}/conversations/{paused['discussionId']}"

    assert bearer(approver).delete(path).status_code == 403  # an approver decides; it does not own
    deleted = bearer(alice).delete(path)

    assert deleted.status_code == 200, deleted.content
    assert not GroupConversation.objects.filter(pk=paused["discussionId"]).exists()
    assert members and not Conversation.objects.filter(pk__in=members).exists()
    pause = Pause.objects.get(subject_type=SubjectType.DISCUSSION, subject_id=paused["discussionId"])
    assert pause.status == PauseStatus.CANCELLED and pause.decided_by == alice.username
    verbs = list(
        AuditEntry.objects.filter(subject_id=paused["discussionId"])
        .order_by("sequence")
        .values_list("verb", flat=True)
    )
    assert verbs[-2:] == ["hitl.approval", "hitl.discussion.deleted"]
    assert bearer(alice).get(path).status_code == 403  # gone: refused like anyone else's
    staff = Client()
    staff.force_login(admin_user)
    admin_page = staff.get(f"/admin/approvals/pendingapproval/{pause.id}/change/")
    assert (
        admin_page.status_code == 200 and b"Cancelled by" in admin_page.content
    )  # its decision stays readable
    assert (
        bearer(approver)
        .post(f"{path}/approve", {"decision": {"verdict": "APPROVED"}}, format="json")
        .status_code
        == 404
    )


def test_a_running_discussion_is_not_deleted(alice):
    from approvals.models import Pause, PauseStatus
    from groups.models import GroupConversation
    from tests.groups.test_admin_group_pages import phase_discussion

    paused = phase_discussion(alice)  # then its continuation runs: the pause RESOLVING, the discussion on
    Pause.objects.filter(subject_id=paused["discussionId"]).update(status=PauseStatus.RESOLVING)
    GroupConversation.objects.filter(pk=paused["discussionId"]).update(state="IN_PROGRESS")
    refused = bearer(alice).delete(f"/groups/{paused['groupId']}/conversations/{paused['discussionId']}")

    assert refused.status_code == 409 and refused.json()["currentState"] == "IN_PROGRESS"
    assert GroupConversation.objects.filter(pk=paused["discussionId"]).exists()


# --- error bodies -----------------------------------------------------------------------------------


def test_an_error_is_eddis_message_in_plain_text_for_a_client_that_prefers_text(alice, approver):
    conversation_id = paused_conversation(client_for(alice))
    said = bearer(alice).post(
        f"/agents/{conversation_id}",
        {"input": "again"},
        format="json",
        HTTP_ACCEPT="text/plain, application/json;q=0.9",
    )
    as_problem = bearer(alice).post(f"/agents/{conversation_id}", {"input": "again"}, format="json")

    assert said.status_code == as_problem.status_code == 409
    assert said["Content-Type"] == "text/plain; charset=utf-8"
    assert said.content.decode() == as_problem.json()["detail"]
    assert as_problem["Content-Type"] == "application/problem+json"
    denied = bearer(approver).post(
        f"/agents/{conversation_id}", {"input": "hi"}, format="json", HTTP_ACCEPT="text/plain, */*"
    )
    assert denied.status_code == 403 and denied.content.decode().startswith("Access denied")
    answered = bearer(alice).get(f"/agents/{conversation_id}", HTTP_ACCEPT="text/plain, application/json")
    assert answered.status_code == 200 and answered.json()["conversationState"] == "AWAITING_HUMAN"


# --- managed conversations --------------------------------------------------------------------------


def test_a_managed_conversation_works_as_eddis_clients_drive_it(alice, admin_user):
    from harnesses.factories import deployed_agent

    trigger = {
        "intent": "support",
        "agentDeployments": [
            {
                "environment": "production",
                "agentId": deployed_agent(),
                "initialContext": {"channel": {"type": "string", "value": "web"}},
            }
        ],
    }
    assert (
        bearer(admin_user).post("/AgentTriggerStore/agenttriggers", trigger, format="json").status_code == 201
    )
    assert bearer(admin_user).get("/AgentTriggerStore/agenttriggers/support").json()["intent"] == "support"
    managed = f"/agents/managed/support/{alice.username}"

    loaded = bearer(alice).get(managed)
    paused = bearer(alice).post(managed, {"input": "please delete my account"}, format="json")
    refused = bearer(alice).post(managed, {"input": "hello"}, format="json")
    again = bearer(alice).get(managed)

    assert loaded.status_code == 200 and loaded.json()["conversationState"] == "READY"
    assert paused.json()["conversationState"] == "AWAITING_HUMAN"
    assert paused.json()["conversationId"] == loaded.json()["conversationId"]
    assert refused.status_code == 409  # while paused, the mapping stays on the paused conversation
    assert again.json()["conversationId"] == loaded.json()["conversationId"]
    assert bearer(alice).post(f"{managed}/endConversation").status_code == 200
    fresh = bearer(alice).get(managed).json()
    assert (
        fresh["conversationId"] != loaded.json()["conversationId"] and fresh["conversationState"] == "READY"
    )
    assert bearer(admin_user).get("/agents/managed/support/someone-else").status_code == 403


def test_the_status_codes_kept_on_purpose_answer_as_documented(alice, approver):
    """Row 9's kept answers (the 202 of a cancel of a running turn is
    tests/conversations/test_cancel_running_turns.py's): a plain user's wrong {groupId} is the 403 of any
    discussion not theirs; an unsigned Slack request is 401."""
    from tests.groups.test_admin_group_pages import phase_discussion

    mallory = make_user("mallory")
    paused, other_group = phase_discussion(alice), phase_discussion(alice)
    wrong = f"/groups/{other_group['groupId']}/conversations/{paused['discussionId']}"

    for method, suffix in (("get", "/approval-status"), ("post", "/cancel"), ("get", "")):
        assert getattr(bearer(alice), method)(f"{wrong}{suffix}").status_code == 403
        assert getattr(bearer(approver), method)(f"{wrong}{suffix}").status_code == 404
    right = f"/groups/{paused['groupId']}/conversations/{paused['discussionId']}"
    assert bearer(mallory).get(right).status_code == bearer(mallory).get(wrong).status_code == 403
    unsigned = APIClient().post("/integrations/slack/interactive", {"payload": "{}"})
    assert unsigned.status_code == 401


def test_mcp_chat_managed_takes_an_intent_and_a_user_id_as_eddis(alice, monkeypatch):
    from conversations.managed import trigger_create
    from harnesses.factories import deployed_agent
    from mcp_surface import conversation_tools
    from mcp_surface.server import _call

    monkeypatch.setattr("mcp_surface.server.close_old_connections", lambda: None)
    trigger_create(
        intent="support", agent_deployments=[{"environment": "production", "agentId": deployed_agent()}]
    )

    def chat(**arguments):
        result = _call(
            conversation_tools.chat_managed, alice, {"message": "please delete my account", **arguments}
        )
        return result.is_error, json.loads(result.content[0].text)

    is_error, paused = chat(intent="support", user_id=alice.username)
    assert not is_error and paused["status"] == "PAUSED_FOR_APPROVAL", paused
    is_error, again = chat(intent="support")
    assert again["conversationId"] == paused["conversationId"]  # the intent's one conversation, still paused
    is_error, refused = chat(intent="support", user_id="someone-else")
    assert is_error and refused["errorCode"] == "FORBIDDEN"
    is_error, refused = chat(intent="support", agent_id="a1")
    assert is_error and refused["details"]["errors"][0]["field"] == "intent"
