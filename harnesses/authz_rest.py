"""The REST cells of the authorization matrix: every documented operation, each role, each subject state.

``REST_ENDPOINTS`` names, for each operation of the OpenAPI schema (the route list
tests/test_api_surface.py checks every endpoint against), its access rule in harnesses/authz_table.py and how
to call it. ``rest_cells`` runs every cell against the real views (DRF's test client, real PostgreSQL) and
returns what happened beside what the table expects. Used by tests/test_authorization_matrix.py (fast)
and bench/authz_matrix.py (full: more subject states and every undocumented method of every path).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.cache import cache
from django_q.models import Schedule
from rest_framework.test import APIClient

from conversations.agent_archive import export_agent
from conversations.agents import create_agent, deploy_agent
from conversations.managed import trigger_create
from groups.demo_group import demo_member_document
from groups.store import create_group
from harnesses.authz_table import NO_SUBJECT, OK, ROLES, ROUTED, expected, outcome_of
from harnesses.factories import account_bot, deployed_agent, paused_conversation
from harnesses.users import client_for, make_user
from slack_surface.integrations import IntegrationInput, create_integration
from toolgate.outbound.secret_store import set_secret

JSON = {"format": "json"}
SCHEDULE = {"func": "approvals.maintenance_tasks.noop", "scheduleType": "MINUTES", "minutes": 60}


@dataclass
class World:
    """Users of every role, their clients, and subjects made on demand (fresh for a call that uses one up)."""

    clients: dict[str, APIClient]
    users: dict[str, Any]
    agent_id: str
    gated_group: str
    # an agent and a gated group whose pauses are routed to a group no role is in (ROUTED_GROUP)
    routed_agent_id: str = ""
    routed_group: str = ""
    cache: dict[tuple[str, str, str], Any] = field(default_factory=dict)

    @classmethod
    def build(cls) -> World:
        users = {
            "owner": make_user("bob"),
            "other": make_user("alice"),
            "staff": make_user("staff", "staff"),  # is_staff, in no HITL group
            "approver": make_user("approver", "approver"),
            "admin": make_user("admin", "admin"),
            "agent": make_user("filing-bot", "agent"),
            "other agent": _service_account_with_every_role("other-bot"),
        }
        clients = {"anonymous": APIClient(), **{role: client_for(user) for role, user in users.items()}}
        scribe = deployed_agent(demo_member_document("scribe", "Noted."))
        gated = create_group(
            document={
                "name": "gated",
                "members": [{"agentId": scribe, "role": "Scribe"}],
                "phases": [{"name": "Opinions", "type": "OPINION", "requiresApproval": True}],
            }
        )
        routed_agent = account_bot(name="authz-routed")
        routed_agent["hitlConfig"] = {**routed_agent.get("hitlConfig", {}), **ROUTED_CONFIG}
        routed_group = create_group(
            document={
                "name": "routed",
                "members": [{"agentId": scribe, "role": "Scribe"}],
                "phases": [{"name": "Opinions", "type": "OPINION", "requiresApproval": True}],
                "hitlConfig": ROUTED_CONFIG,
            }
        )
        return cls(
            clients=clients,
            users=users,
            agent_id=deployed_agent(),
            gated_group=str(gated.group_id),
            routed_agent_id=deployed_agent(routed_agent),
            routed_group=str(routed_group.group_id),
        )

    def subject(self, kind: str, state: str, *, fresh: bool, user: str = "") -> Any:
        """A ``kind`` subject in ``state`` owned by the owner: shared between read-only cells (``user``
        empty), or kept for one endpoint's cells (``user``) until a call is let through and may have used
        it up (``used``); ``fresh``: a new one every time."""
        if not fresh and (kind, state, user) in self.cache:
            return self.cache[kind, state, user]
        made = MAKERS[kind](self, state)
        if not fresh:
            self.cache[kind, state, user] = made
        return made

    def group_of(self, state: str) -> str:
        """The group a discussion in ``state`` runs in: the routed one for ``routed``."""
        return self.routed_group if state == ROUTED else self.gated_group

    def used(self, kind: str, state: str, user: str) -> None:
        self.cache.pop((kind, state, user), None)


def _service_account_with_every_role(username: str) -> Any:
    """A service account someone also made staff and put in the admin and approver groups: none of it
    counts (approvals.access.is_service_account)."""
    user = make_user(username, "agent")
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    for name in (settings.HITL_ADMIN_GROUP, settings.HITL_APPROVER_GROUP):
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


ROUTED_CONFIG = {"approvers": {"groups": ["authz-finance"]}}  # a group none of the roles is in

PINNED = {
    "method": "POST",
    "url": "https://payments.example/refunds",
    "headers": {"Content-Type": "application/json", "Authorization": "Bearer sk-live-abcdef123456"},
    "body": '{"orderId":"A-1","amount":250}',
    "secretHeaders": ["Authorization"],
}


def filing_body(key: str, *, on_behalf_of: str | None = "bob") -> dict[str, Any]:
    """A valid filing: a refund with its exact request pinned, made for the owner (bob) unless
    ``on_behalf_of`` says otherwise; every object a filing may hold is there (S2 adds a field to each)."""
    body: dict[str, Any] = {
        "idempotencyKey": key,
        "agent": "refund-bot",
        "action": {"name": "refund", "arguments": {"orderId": "A-1", "amount": 250}},
        "reason": "Refund over 100 EUR",
        "request": PINNED,
        "hitlConfig": {"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT1H", "allowEdit": True},
    }
    if on_behalf_of is not None:
        body["onBehalfOf"] = on_behalf_of
    return body


def _approval_request(world: World, state: str) -> str:
    """An approval request the agent filed for the owner (for no one when ``ownerless``); ``decided``:
    approved, so its filer can claim it."""
    if state == "unknown":
        return str(uuid.uuid4())
    body = filing_body(f"authz-{uuid.uuid4().hex}", on_behalf_of=None if state == "ownerless" else "bob")
    if state == ROUTED:
        body["hitlConfig"] = {**body["hitlConfig"], **ROUTED_CONFIG}
    filed = world.clients["agent"].post("/approval-requests", body, **JSON)
    assert filed.status_code == 201, filed.content
    request_id = filed.json()["id"]
    if state == "decided":
        decided = world.clients["admin"].post(f"/approval-requests/{request_id}/decision", VERDICT, **JSON)
        assert decided.status_code == 200 and decided.json()["status"] == "APPROVED", decided.content
    return request_id


def _conversation(world: World, state: str) -> str:
    if state == "unknown":
        return str(uuid.uuid4())
    owner = world.clients["owner"] if state != "ownerless" else world.clients["admin"]
    conversation_id = paused_conversation(owner, world.routed_agent_id if state == ROUTED else world.agent_id)
    if state == "ownerless":
        from conversations.models import Conversation

        Conversation.objects.filter(pk=conversation_id).update(owner=None)
    if state == "decided":
        decided = world.clients["admin"].post(
            f"/agents/{conversation_id}/resume?wait=5", {"verdict": "APPROVED"}, **JSON
        )
        assert decided.status_code == 200, decided.content
    return conversation_id


def _discussion(world: World, state: str) -> str:
    if state == "unknown":
        return str(uuid.uuid4())
    started = world.clients["owner"].post(
        f"/groups/{world.group_of(state)}/conversations", {"question": "Ship on Friday?"}, **JSON
    )
    assert started.status_code == 201 and started.json()["state"] == "AWAITING_APPROVAL", started.content
    discussion_id = started.json()["discussionId"]
    if state == "ownerless":
        from groups.models import GroupConversation

        GroupConversation.objects.filter(pk=discussion_id).update(owner=None)
    if state == "decided":
        decided = world.clients["admin"].post(
            f"/groups/{world.gated_group}/conversations/{discussion_id}/approve?wait=60",
            {"decision": {"verdict": "APPROVED"}},
            **JSON,
        )
        assert decided.status_code in (200, 202), decided.content
    return discussion_id


def _agent(world: World, state: str) -> str:
    row = create_agent(document=account_bot(name=f"authz-{uuid.uuid4().hex[:8]}"), created_by=None)
    deploy_agent(agent_id=row.agent_id, version=row.version, environment="production")
    return str(row.agent_id)


def _group(world: World, state: str) -> str:
    document = {
        "name": "panel",
        "members": [{"agentId": world.agent_id}],
        "phases": [{"name": "p", "type": "OPINION"}],
    }
    return str(create_group(document=document).group_id)


def _schedule(world: World, state: str) -> int:
    name = f"authz-{uuid.uuid4().hex[:12]}"
    if state == "hitl job":
        name = f"hitl-authz-{uuid.uuid4().hex[:12]}"  # HITL's by its name (schedules.protection)
    return Schedule.objects.create(
        name=name, func="approvals.maintenance_tasks.noop", schedule_type=Schedule.MINUTES, minutes=60
    ).pk


def _secret(world: World, state: str) -> str:
    name = f"authz.{uuid.uuid4().hex[:8]}"
    set_secret(name=name, value="s3cret")
    return name


def _integration(world: World, state: str) -> str:
    set_secret(name="slack.signing", value="authz-signing-secret")
    name = f"authz{uuid.uuid4().hex[:8]}"
    create_integration(name=name, data=_slack_input(world), creator=world.users["admin"])
    return name


def _slack_input(world: World) -> IntegrationInput:
    return IntegrationInput(
        agent_id=world.agent_id,
        environment="production",
        conversation_owner=None,
        signing_secret="${vault:slack.signing}",
        bot_token="${vault:slack.signing}",
        approval_channel="C1",
        approver_user_ids="U1",
    )


def _archive(world: World, state: str) -> bytes:
    return export_agent(agent_id=world.agent_id, version=None)[1]


def _trigger(world: World, state: str) -> str:
    """An agent trigger of a new intent, to the world's agent: its intent."""
    intent = f"authz-{uuid.uuid4().hex[:8]}"
    trigger_create(
        intent=intent, agent_deployments=[{"environment": "production", "agentId": world.agent_id}]
    )
    return intent


MAKERS: dict[str, Callable[[World, str], Any]] = {
    "conversation": _conversation,
    "discussion": _discussion,
    "agent": _agent,
    "group": _group,
    "schedule": _schedule,
    "secret": _secret,
    "integration": _integration,
    "archive": _archive,
    "trigger": _trigger,
    "approval request": _approval_request,
}


@dataclass(frozen=True)
class Endpoint:
    """An operation: its rule, the subject kind its path names (and whether a call uses it up), and the
    call: ``path`` with ``{c}`` (conversation), ``{d}`` (discussion), ``{g}`` (the gated group), ``{a}``
    (the agent), ``{s}`` (the subject), ``body`` (JSON) and ``extra`` (test-client keywords)."""

    rule: str
    path: str
    subject: str | None = None
    fresh: bool = False
    body: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    states: tuple[str, ...] = (NO_SUBJECT,)


CONV = ("pending", "decided", "unknown")
VERDICT = {"verdict": "APPROVED"}
GROUP_DECISION = {"decision": {"verdict": "APPROVED"}}
SSE = {"HTTP_ACCEPT": "text/event-stream"}
D = "/groups/{g}/conversations/{s}"
R = "/approval-requests/{s}"
T = "/AgentTriggerStore/agenttriggers/{s}"
M = "/agents/managed/{s}/{me}"
TRIGGER = {"agentDeployments": [{"environment": "production", "agentId": "{a}"}]}

# "METHOD /template" as the schema names it (plus a query where one changes who may call) -> the call.
REST_ENDPOINTS: dict[str, Endpoint] = {
    "GET /healthz": Endpoint("public", "/healthz"),
    "POST /auth/token": Endpoint("public", "/auth/token", body={"username": "bob", "password": "pw-bob"}),
    "GET /api/schema/": Endpoint("public", "/api/schema/"),
    "GET /api/docs/": Endpoint("public", "/api/docs/"),
    "GET /metrics": Endpoint("public", "/metrics"),
    "GET /q/metrics": Endpoint("public", "/q/metrics"),
    "GET /agentstore/agents": Endpoint("signed in", "/agentstore/agents"),
    "POST /agentstore/agents": Endpoint("admin", "/agentstore/agents", body=account_bot(name="authz-new")),
    "GET /agentstore/agents/{agent_id}": Endpoint("signed in", "/agentstore/agents/{a}"),
    "PUT /agentstore/agents/{agent_id}": Endpoint(
        "admin", "/agentstore/agents/{s}", "agent", body=account_bot()
    ),
    "DELETE /agentstore/agents/{agent_id}": Endpoint("admin", "/agentstore/agents/{s}", "agent", fresh=True),
    "POST /administration/{environment}/deploy/{agent_id}": Endpoint(
        "admin", "/administration/production/deploy/{s}", "agent"
    ),
    "POST /administration/{environment}/undeploy/{agent_id}": Endpoint(
        "admin", "/administration/production/undeploy/{s}", "agent", fresh=True
    ),
    "GET /administration/{environment}/deploymentstatus/{agent_id}": Endpoint(
        "signed in", "/administration/production/deploymentstatus/{a}"
    ),
    "GET /backup/export/{agent_id}": Endpoint("admin", "/backup/export/{a}"),
    "POST /backup/import": Endpoint(
        "admin", "/backup/import", "archive", extra={"content_type": "application/zip"}
    ),
    "POST /administration/operator/canary-result": Endpoint(
        "admin", "/administration/operator/canary-result", body={"outcome": "pass"}
    ),
    "POST /administration/operator/gate-status": Endpoint(
        "admin", "/administration/operator/gate-status", body={"verified": True}
    ),
    "POST /agents/{agent_id}/start": Endpoint(
        "signed in", "/agents/{a}/start?environment=production", body={}
    ),
    "GET /agents/pending-approvals": Endpoint("signed in", "/agents/pending-approvals"),
    "GET /agents/{conversation_id}": Endpoint("reads turns", "/agents/{s}", "conversation", states=CONV),
    "POST /agents/{conversation_id}": Endpoint(
        "owner or admin", "/agents/{s}", "conversation", body={"input": "hello"}, states=CONV
    ),
    "GET /agents/{conversation_id}/approval-status": Endpoint(
        "decider", "/agents/{s}/approval-status", "conversation", states=CONV
    ),
    "GET /agents/{conversation_id}/approval-status?detail=full": Endpoint(
        "reads turns", "/agents/{s}/approval-status?detail=full", "conversation", states=CONV
    ),
    "POST /agents/{conversation_id}/resume": Endpoint(
        "decider", "/agents/{s}/resume", "conversation", fresh=True, body=VERDICT, states=CONV
    ),
    "POST /agents/{conversation_id}/cancel": Endpoint(
        "decider", "/agents/{s}/cancel", "conversation", fresh=True, states=CONV
    ),
    "POST /agents/{conversation_id}/endConversation": Endpoint(
        "owner or admin", "/agents/{s}/endConversation", "conversation", fresh=True, states=CONV
    ),
    "POST /agents/{conversation_id}/undo": Endpoint(
        "owner or admin", "/agents/{s}/undo", "conversation", fresh=True, states=CONV
    ),
    "POST /agents/{conversation_id}/redo": Endpoint(
        "owner or admin", "/agents/{s}/redo", "conversation", fresh=True, states=CONV
    ),
    "GET /AgentTriggerStore/agenttriggers": Endpoint("admin", "/AgentTriggerStore/agenttriggers"),
    "POST /AgentTriggerStore/agenttriggers": Endpoint(
        "admin", "/AgentTriggerStore/agenttriggers", body={"intent": "authz-new", **TRIGGER}
    ),
    "GET /AgentTriggerStore/agenttriggers/{intent}": Endpoint("admin", T, "trigger"),
    "PUT /AgentTriggerStore/agenttriggers/{intent}": Endpoint("admin", T, "trigger", body=TRIGGER),
    "DELETE /AgentTriggerStore/agenttriggers/{intent}": Endpoint("admin", T, "trigger", fresh=True),
    # {me} is the caller's own user name: another's is refused to everyone (tests/conversations/
    # test_managed_conversations.py); in this order each caller's conversation has a step to undo and redo
    "GET /agents/managed/{intent}/{user_id}": Endpoint("signed in", M, "trigger"),
    "POST /agents/managed/{intent}/{user_id}": Endpoint("signed in", M, "trigger", body={"input": "hello"}),
    "GET /agents/managed/{intent}/{user_id}/undo": Endpoint("signed in", M + "/undo", "trigger"),
    "POST /agents/managed/{intent}/{user_id}/undo": Endpoint("signed in", M + "/undo", "trigger"),
    "GET /agents/managed/{intent}/{user_id}/redo": Endpoint("signed in", M + "/redo", "trigger"),
    "POST /agents/managed/{intent}/{user_id}/redo": Endpoint("signed in", M + "/redo", "trigger"),
    "POST /agents/managed/{intent}/{user_id}/endConversation": Endpoint(
        "signed in", M + "/endConversation", "trigger"
    ),
    "GET /groupstore/groups": Endpoint("signed in", "/groupstore/groups"),
    "POST /groupstore/groups": Endpoint(
        "admin",
        "/groupstore/groups",
        body={"name": "p", "members": [{"agentId": "{a}"}], "phases": [{"name": "p", "type": "OPINION"}]},
    ),
    "GET /groupstore/groups/{group_id}": Endpoint("signed in", "/groupstore/groups/{g}"),
    "PUT /groupstore/groups/{group_id}": Endpoint(
        "admin",
        "/groupstore/groups/{s}",
        "group",
        body={"name": "p2", "members": [{"agentId": "{a}"}], "phases": [{"name": "p", "type": "OPINION"}]},
    ),
    "DELETE /groupstore/groups/{group_id}": Endpoint("admin", "/groupstore/groups/{s}", "group", fresh=True),
    "POST /groups/{group_id}/conversations": Endpoint(
        "signed in", "/groups/{g}/conversations", body={"question": "Ship?"}
    ),
    "POST /groups/{group_id}/conversations/stream": Endpoint(
        "signed in", "/groups/{g}/conversations/stream", body={"question": "Ship?"}, extra=SSE
    ),
    "GET /groups/{group_id}/conversations/pending-approvals": Endpoint(
        "signed in", "/groups/{g}/conversations/pending-approvals"
    ),
    "GET /groups/pending-approvals": Endpoint("signed in", "/groups/pending-approvals"),
    "GET /groups/{group_id}/conversations/{discussion_id}": Endpoint("decider", D, "discussion", states=CONV),
    "GET /groups/{group_id}/conversations/{discussion_id}/approval-status": Endpoint(
        "decider", D + "/approval-status", "discussion", states=CONV
    ),
    "GET /groups/{group_id}/conversations/{discussion_id}/approval-status?detail=full": Endpoint(
        "reads turns", D + "/approval-status?detail=full", "discussion", states=CONV
    ),
    "POST /groups/{group_id}/conversations/{discussion_id}/approve": Endpoint(
        "decider", D + "/approve", "discussion", fresh=True, body=GROUP_DECISION, states=CONV
    ),
    "POST /groups/{group_id}/conversations/{discussion_id}/approve/stream": Endpoint(
        "decider",
        D + "/approve/stream",
        "discussion",
        fresh=True,
        body=GROUP_DECISION,
        extra=SSE,
        states=CONV,
    ),
    "POST /groups/{group_id}/conversations/{discussion_id}/cancel": Endpoint(
        "decider", D + "/cancel", "discussion", fresh=True, states=CONV
    ),
    "GET /groups/{group_id}/conversations": Endpoint("signed in", "/groups/{g}/conversations"),
    "DELETE /groups/{group_id}/conversations/{discussion_id}": Endpoint(
        "owner or admin", D, "discussion", fresh=True, states=CONV
    ),
    "GET /audit/entries": Endpoint("staff", "/audit/entries"),
    "GET /audit/export": Endpoint("staff", "/audit/export?format=jsonl"),
    "GET /schedulestore/schedules": Endpoint("staff", "/schedulestore/schedules"),
    "POST /schedulestore/schedules": Endpoint("staff", "/schedulestore/schedules", body=SCHEDULE),
    "GET /schedulestore/schedules/{schedule_id}": Endpoint(
        "staff (read)", "/schedulestore/schedules/{s}", "schedule"
    ),
    "PUT /schedulestore/schedules/{schedule_id}": Endpoint(
        "staff", "/schedulestore/schedules/{s}", "schedule", body={"minutes": 30}
    ),
    "DELETE /schedulestore/schedules/{schedule_id}": Endpoint(
        "staff", "/schedulestore/schedules/{s}", "schedule", fresh=True
    ),
    "POST /schedulestore/schedules/{schedule_id}/enable": Endpoint(
        "staff", "/schedulestore/schedules/{s}/enable", "schedule", body={}
    ),
    "POST /schedulestore/schedules/{schedule_id}/disable": Endpoint(
        "staff", "/schedulestore/schedules/{s}/disable", "schedule"
    ),
    "POST /schedulestore/schedules/{schedule_id}/fire": Endpoint(
        "staff", "/schedulestore/schedules/{s}/fire", "schedule"
    ),
    "GET /secretstore/secrets": Endpoint("admin", "/secretstore/secrets"),
    "PUT /secretstore/secrets/{name}": Endpoint(
        "admin", "/secretstore/secrets/authz.new", body={"value": "v"}
    ),
    "DELETE /secretstore/secrets/{name}": Endpoint("admin", "/secretstore/secrets/{s}", "secret", fresh=True),
    "GET /integrationstore/slack": Endpoint("admin", "/integrationstore/slack"),
    "POST /integrationstore/slack": Endpoint("admin", "/integrationstore/slack", body="slack-new"),
    "GET /integrationstore/slack/{name}": Endpoint("admin", "/integrationstore/slack/{s}", "integration"),
    "PUT /integrationstore/slack/{name}": Endpoint(
        "admin", "/integrationstore/slack/{s}", "integration", body="slack"
    ),
    "DELETE /integrationstore/slack/{name}": Endpoint(
        "admin", "/integrationstore/slack/{s}", "integration", fresh=True
    ),
    "POST /integrations/slack/events": Endpoint(
        "signed by Slack", "/integrations/slack/events", body={"type": "x"}
    ),
    "POST /integrations/slack/interactive": Endpoint(
        "signed by Slack",
        "/integrations/slack/interactive",
        extra={"data": "payload=%7B%7D", "content_type": "application/x-www-form-urlencoded"},
    ),
    "POST /approval-requests": Endpoint("service account", "/approval-requests", body=filing_body("authz-1")),
    "GET /approval-requests": Endpoint("lists requests", "/approval-requests"),
    "POST /approval-requests/webhook-secret": Endpoint(
        "service account", "/approval-requests/webhook-secret"
    ),
    "GET /approval-requests/{request_id}": Endpoint("request party", R, "approval request", states=CONV),
    "GET /approval-requests/{request_id}/events": Endpoint(
        "request party", R + "/events", "approval request", extra=SSE, states=CONV
    ),
    "POST /approval-requests/{request_id}/decision": Endpoint(
        "request reviewer", R + "/decision", "approval request", fresh=True, body=VERDICT, states=CONV
    ),
    "POST /approval-requests/{request_id}/claim": Endpoint(
        "request filer", R + "/claim", "approval request", fresh=True, body={"request": PINNED}, states=CONV
    ),
    "POST /approval-requests/{request_id}/outcome": Endpoint(
        "request filer", R + "/outcome", "approval request", body={"status": "succeeded"}, states=CONV
    ),
    "POST /approval-requests/{request_id}/cancel": Endpoint(
        "request party", R + "/cancel", "approval request", fresh=True, states=CONV
    ),
    "GET /.well-known/hitl-grant-keys": Endpoint("public", "/.well-known/hitl-grant-keys"),
}
# The fast size runs the decided state where it changes the answer (an approver reads turns only while
# a subject awaits approval; a decided pause is no longer decided again) and leaves the rest to the full.
DECIDED_MATTERS = {
    name
    for name, e in REST_ENDPOINTS.items()
    if e.rule == "reads turns" or "approve" in name or "resume" in name or e.subject == "approval request"
}
# the deciding calls, asked again on a subject whose pause is routed to others (harnesses.authz_table.ROUTED)
DECIDING = {
    "POST /agents/{conversation_id}/resume",
    "POST /groups/{group_id}/conversations/{discussion_id}/approve",
    "POST /approval-requests/{request_id}/decision",
}
FULL_STATES = {
    "conversation": ("ownerless",),
    "discussion": ("ownerless",),
    "schedule": ("hitl job",),
    "approval request": ("ownerless",),
}


def _slack_body(world: World, *, named: bool) -> dict[str, Any]:
    body = {
        "agentId": world.agent_id,
        "signingSecret": "${vault:slack.signing}",
        "botToken": "${vault:slack.signing}",
        "hitlApprovalChannel": "C1",
        "hitlApproverUserIds": "U1",
    }
    return {"name": f"authz{uuid.uuid4().hex[:8]}", **body} if named else body


def _filled(value: Any, world: World) -> Any:
    if isinstance(value, str):
        return value.replace("{a}", world.agent_id)
    if isinstance(value, dict):
        return {key: _filled(item, world) for key, item in value.items()}
    if isinstance(value, list):
        return [_filled(item, world) for item in value]
    return value


def call_kwargs(endpoint: Endpoint, world: World, subject: Any) -> dict[str, Any]:
    kwargs = dict(endpoint.extra)
    if endpoint.subject == "archive":
        kwargs["data"] = subject
    elif endpoint.body in ("slack", "slack-new"):
        set_secret(name="slack.signing", value="authz-signing-secret")
        kwargs |= {"data": _slack_body(world, named=endpoint.body == "slack-new"), **JSON}
    elif endpoint.body is not None:
        kwargs |= {"data": _filled(endpoint.body, world), **JSON}
    return kwargs


def run_cell(world: World, name: str, endpoint: Endpoint, role: str, state: str) -> dict[str, Any]:
    """One cell: call ``name`` as ``role`` on a subject in ``state``; what happened beside what is expected."""
    method = name.split()[0].lower()
    user = name if endpoint.fresh else ""
    subject = world.subject(endpoint.subject, state, fresh=False, user=user) if endpoint.subject else None
    path = endpoint.path.replace("{a}", world.agent_id).replace("{g}", world.group_of(state))
    path = path.replace("{s}", str(subject)) if endpoint.subject not in (None, "archive") else path
    path = path.replace("{me}", world.users[role].username if role in world.users else role)
    if name == "POST /auth/token":
        cache.clear()  # the login throttle counts per client
    response = getattr(world.clients[role], method)(path, **call_kwargs(endpoint, world, subject))
    got = outcome_of(response.status_code)
    if endpoint.fresh and got == OK:
        world.used(endpoint.subject, state, user)
    detail = "" if response.status_code < 500 else response.content[:200].decode("utf-8", "replace")
    # a stream is not read nor closed: closing it ends the request, which closes the test's connection
    return {
        "surface": "REST",
        "endpoint": name,
        "state": state,
        "role": role,
        "expected": expected(endpoint.rule, role, state),
        "got": got,
        "detail": detail
        or (str(response.status_code) if got != expected(endpoint.rule, role, state) else ""),
    }


def rest_cells(world: World, *, full: bool = False) -> list[dict[str, Any]]:
    """Every (operation, state, role) cell; ``full`` adds ownerless subjects and HITL jobs."""
    cells = []
    for name, endpoint in REST_ENDPOINTS.items():
        states = (
            endpoint.states
            if full or name in DECIDED_MATTERS
            else tuple(s for s in endpoint.states if s != "decided")
        )
        states += FULL_STATES.get(endpoint.subject or "", ()) if full else ()
        states += (ROUTED,) if name in DECIDING else ()
        for state in states:
            for role in ROLES:
                cells.append(run_cell(world, name, endpoint, role, state))
    return cells


METHODS = ("get", "post", "put", "patch", "delete")


def method_cells(world: World) -> list[dict[str, Any]]:
    """Every method a path does not document, as every role: never a success (401, 403, 404 or 405)."""
    documented: dict[str, set[str]] = {}
    for name in REST_ENDPOINTS:
        if "?" not in name:
            documented.setdefault(name.split()[1], set()).add(name.split()[0].lower())
    cells = []
    for template, methods in documented.items():
        endpoint = next(e for n, e in REST_ENDPOINTS.items() if n.split()[1] == template and "?" not in n)
        for method in METHODS:
            if method in methods:
                continue
            for role in ROLES:
                subject = (
                    world.subject(endpoint.subject, endpoint.states[0], fresh=False)
                    if endpoint.subject not in (None, "archive")
                    else None
                )
                path = (
                    endpoint.path.split("?")[0]
                    .replace("{a}", world.agent_id)
                    .replace("{g}", world.gated_group)
                )
                if template == "/auth/token":
                    cache.clear()  # the login throttle counts per client, any method
                response = getattr(world.clients[role], method)(path.replace("{s}", str(subject)))
                status = response.status_code
                cells.append(
                    {
                        "surface": "REST (undocumented method)",
                        "endpoint": f"{method.upper()} {template}",
                        "state": endpoint.states[0],
                        "role": role,
                        "expected": "refused",
                        "got": "refused" if status in (401, 403, 404, 405) else status,
                        "detail": str(status),
                    }
                )
    return cells
