"""Who approves what: a pause routed to approvers (groups, users), escalation steps that widen who may
decide as time passes, and the save-time checks of the configuration. Real conversations through REST,
real PostgreSQL; time travel for escalation (the routes' times are compared with the clock in SQL)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import Group
from django.utils import timezone

from approvals.models import AuditEntry, Pause, PauseRoute, PauseStatus
from approvals.routing import effective_routing, routing_errors
from harnesses.factories import account_bot, deployed_agent, paused_conversation
from harnesses.users import client_for, make_user

pytestmark = pytest.mark.django_db

FINANCE = {"approvers": {"groups": ["finance"]}}


def routed_pause(owner, **hitl) -> Pause:
    agent = deployed_agent(account_bot(hitlConfig={**account_bot().get("hitlConfig", {}), **hitl}))
    conversation_id = paused_conversation(client_for(owner), agent)
    return Pause.objects.get(subject_id=conversation_id, status=PauseStatus.PENDING)


def approver_in(username: str, *groups: str):
    user = make_user(username, "approver")
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


def resume(user, pause: Pause, verdict: str = "APPROVED", **body):
    return client_for(user).post(
        f"/agents/{pause.subject_id}/resume", {"verdict": verdict, **body}, format="json"
    )


def inbox_ids(user) -> set[str]:
    response = client_for(user).get("/agents/pending-approvals")
    assert response.status_code == 200, response.content
    return {row["pauseId"] for row in response.json()}


def test_a_routed_pause_is_decided_only_by_its_approvers_and_admins(alice, admin_user):
    pause = routed_pause(alice, **FINANCE)
    outsider, finance = approver_in("olga"), approver_in("fred", "finance")
    assert pause.routed and set(
        PauseRoute.objects.filter(pause=pause).values_list("group_name", flat=True)
    ) == {"finance"}

    refused = resume(outsider, pause)
    assert refused.status_code == 403
    assert "routed to group finance" in refused.json()["detail"]
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING
    assert not AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.approval").exists()

    assert str(pause.pk) not in inbox_ids(outsider)  # the inbox lists only what the reader may decide
    assert str(pause.pk) in inbox_ids(finance) and str(pause.pk) in inbox_ids(admin_user)
    assert resume(finance, pause).status_code == 200
    assert Pause.objects.get(pk=pause.pk).decided_by == "fred"


def test_routing_narrows_and_never_grants_the_approver_role(alice):
    pause = routed_pause(alice, approvers={"users": ["bob"]})
    bob = make_user("bob")  # named, but holds no approver role
    assert resume(bob, pause).status_code == 403
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.PENDING


def test_an_escalation_step_widens_who_may_decide(alice):
    pause = routed_pause(
        alice,
        approvers={"groups": ["finance"]},
        escalation=[{"after": "PT15M", "approvers": {"groups": ["on-call"]}, "notify": True}],
    )
    on_call = approver_in("oscar", "on-call")
    assert str(pause.pk) not in inbox_ids(on_call)
    assert resume(on_call, pause).status_code == 403

    with time_machine.travel(timezone.now() + timedelta(minutes=16), tick=False):
        assert str(pause.pk) in inbox_ids(on_call)
        assert resume(on_call, pause).status_code == 200
    assert Pause.objects.get(pk=pause.pk).decided_by == "oscar"


def test_the_routing_is_frozen_when_the_pause_opens(alice):
    pause = routed_pause(alice, **FINANCE)
    # a later agent version names other approvers: the pending pause keeps its own
    assert pause.routing["approvers"] == {"groups": ["finance"], "users": []}
    assert AuditEntry.objects.get(pause_id=pause.pk, verb="hitl.pause").detail["routing"] == pause.routing


def test_an_unrouted_pause_keeps_todays_rule(alice, approver):
    pause = routed_pause(alice)
    assert not pause.routed and pause.required_approvals == 1
    assert str(pause.pk) in inbox_ids(approver)
    assert resume(approver, pause).status_code == 200


def test_the_strictest_level_wins():
    agent = {"approvers": {"groups": ["finance"]}, "requiredApprovals": 2, "remindBefore": "PT5M"}
    rule = {"approvers": {"users": ["tess"]}, "requiredApprovals": 3, "remindBefore": "PT10M"}
    routing = effective_routing(agent, [rule])
    assert (
        routing.approvers.users == ("tess",) and routing.approvers.groups == ()
    )  # the rule is more specific
    assert routing.required == 3 and routing.remind_before == "PT10M"
    other = {"approvers": {"users": ["uma"]}}
    assert effective_routing(agent, [rule, other]).admins_only  # rules that disagree: admins only
    assert effective_routing(None).routed is False


@pytest.mark.parametrize(
    ("config", "field", "words"),
    [
        ({"approvers": ["finance"]}, "hitlConfig.approvers", "must be an object"),
        ({"approvers": {"teams": ["x"]}}, "hitlConfig.approvers.teams", "not an approvers field"),
        ({"approvers": {"groups": []}}, "hitlConfig.approvers", "names nobody"),
        ({"requiredApprovals": 0}, "hitlConfig.requiredApprovals", "from 1 to 20"),
        ({"requiredApprovals": True}, "hitlConfig.requiredApprovals", "from 1 to 20"),
        (
            {"approvers": {"users": ["ann", "ben"]}, "requiredApprovals": 3},
            "hitlConfig.requiredApprovals",
            "only 2 user(s) may ever approve",
        ),
        ({"escalation": [{"approvers": {"users": ["x"]}}]}, "hitlConfig.escalation[0].after", "is required"),
        (
            {"escalation": [{"after": "soon", "approvers": {"users": ["x"]}}]},
            "hitlConfig.escalation[0].after",
            "ISO-8601",
        ),
        ({"escalation": [{"after": "PT5M"}]}, "hitlConfig.escalation[0].approvers", "is required"),
        ({"remindBefore": "PT0S"}, "hitlConfig.remindBefore", "positive"),
    ],
)
def test_routing_is_checked_on_save_with_field_paths(config, field, words):
    errors = routing_errors(config, "hitlConfig")
    assert any(error.field == field and words in error.message for error in errors), errors


def test_an_agent_with_a_bad_routing_is_refused_and_unknown_names_are_warnings(admin_user):
    client = client_for(admin_user)
    bad = account_bot(hitlConfig={"approvers": {"users": ["ann"]}, "requiredApprovals": 2})
    refused = client.post("/agentstore/agents", bad, format="json")
    assert refused.status_code == 400
    assert "hitlConfig.requiredApprovals" in str(refused.json())
    saved = client.post(
        "/agentstore/agents", account_bot(hitlConfig={"approvers": {"groups": ["treasury"]}}), format="json"
    )
    assert saved.status_code == 201, saved.content
    assert any("treasury" in warning["message"] for warning in saved.json()["warnings"])


def test_a_routed_approval_request_is_listed_only_to_its_approvers(admin_user):
    agent = make_user("refund-bot", "agent")
    filed = client_for(agent).post(
        "/approval-requests",
        {
            "agent": "refund-bot",
            "idempotencyKey": "run-1:call-1",
            "action": {"name": "refund", "arguments": {"amount": 100}},
            "reason": "Refund over 100 EUR",
            "hitlConfig": {"approvers": {"groups": ["finance"]}},
        },
        format="json",
    )
    assert filed.status_code == 201, filed.content
    outsider, finance = approver_in("olga"), approver_in("fred", "finance")

    def pending(user) -> list[str]:
        response = client_for(user).get("/approval-requests?status=pending")
        assert response.status_code == 200, response.content
        return [row["id"] for row in response.json()["approvalRequests"]]

    assert pending(outsider) == [] and pending(finance) == [filed.json()["id"]]
    assert pending(admin_user) == [filed.json()["id"]]
    refused = client_for(outsider).post(
        f"/approval-requests/{filed.json()['id']}/decision", {"verdict": "APPROVED"}, format="json"
    )
    assert refused.status_code == 403 and "routed to group finance" in refused.json()["detail"]


def test_a_tool_rule_routes_its_calls_to_its_own_approvers(alice, http_recorder):
    from tests.toolgate.test_tool_pauses import paused_transfer, transfers

    rule = {"match": "transfer_*", "approvers": {"groups": ["finance"]}, "requiredApprovals": 2}
    _, pause = paused_transfer(
        client_for(alice),
        http_recorder,
        tool_approvals={"requireApproval": ["transfer_*"], "rules": [rule]},
    )
    assert pause.kind == "TOOL_CALL" and pause.routed and pause.required_approvals == 2
    fred, fay, olga = approver_in("fred", "finance"), approver_in("fay", "finance"), approver_in("olga")
    assert resume(olga, pause).status_code == 403
    assert resume(fred, pause).status_code == 202
    assert transfers(http_recorder) == []  # one approval of two: nothing runs
    assert resume(fay, pause).status_code == 200
    from harnesses.queue_drain import run_queued_tasks

    run_queued_tasks()
    assert len(transfers(http_recorder)) == 1


def test_a_group_gate_needs_its_two_approvals(alice):
    from groups.models import GroupConversation
    from harnesses.members import answering, discuss, group

    group_id = group(
        [(answering("pat", "Ship it."), "Optimist")],
        [
            {"name": "Opinions", "type": "OPINION", "requiresApproval": True},
            {"name": "Decision", "type": "SYNTHESIS"},
        ],
        hitlConfig={"requiredApprovals": 2},
    )
    body = discuss(client_for(alice), group_id)
    url = f"/groups/{group_id}/conversations/{body['discussionId']}/approve?wait=60"
    ann, ben = approver_in("ann"), approver_in("ben")
    first = client_for(ann).post(url, {"decision": {"verdict": "APPROVED"}}, format="json")
    assert first.status_code == 202, first.content
    assert first.json()["vote"]["approvals"]["count"] == 1
    assert GroupConversation.objects.get(pk=body["discussionId"]).state == "AWAITING_APPROVAL"
    second = client_for(ben).post(url, {"decision": {"verdict": "APPROVED"}}, format="json")
    assert second.status_code in (200, 202) and "vote" not in second.json()
    assert GroupConversation.objects.get(pk=body["discussionId"]).state != "AWAITING_APPROVAL"
