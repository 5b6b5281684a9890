"""An approval request's timeout policy (its ``hitlConfig``), fired by the core's timers with time travel
instead of sleeping: WAIT_INDEFINITELY stays PENDING; AUTO_APPROVE is APPROVED by ``system:timeout`` and
claimable; AUTO_REJECT is REJECTED; ABORT is EXPIRED. Each fires once, never before its deadline, never
after a reviewer's decision; a bad ``hitlConfig`` is a 400 naming each field by its path."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django_q.models import Schedule

from approval_requests.models import ApprovalRequest, WebhookDelivery
from approvals.models import AuditEntry, Pause, PauseStatus
from approvals.timers import TIMER_FUNC, fire_due_batch, fire_timeout
from harnesses.users import client_for
from tests.approval_requests.conftest import filing

pytestmark = pytest.mark.django_db
CALLBACK = "https://agents.example/hooks"


def at(moment: Any) -> Any:
    return time_machine.travel(moment, tick=False)


def filed_with(agent: Any, config: dict[str, Any] | None, key: str = "run-1/call-1") -> dict[str, Any]:
    body = filing(key, callbackUrl=CALLBACK, **({"hitlConfig": config} if config is not None else {}))
    answer = client_for(agent).post("/approval-requests", body, format="json")
    assert answer.status_code == 201, answer.content
    return answer.json()


def pause_of(filed: dict[str, Any]) -> Pause:
    return Pause.objects.get(subject_id=filed["id"])


def read(agent: Any, filed: dict[str, Any]) -> dict[str, Any]:
    answer = client_for(agent).get(f"/approval-requests/{filed['id']}")
    assert answer.status_code == 200, answer.content
    return answer.json()


def timeout_entries(filed: dict[str, Any]) -> list[tuple[str, str, bool]]:
    entries = AuditEntry.objects.filter(subject_id=filed["id"], verb="hitl.approval").order_by("sequence")
    return [(e.verdict, e.actor, e.automated) for e in entries]


@pytest.mark.parametrize(
    "config", [None, {}, {"timeoutPolicy": "WAIT_INDEFINITELY"}], ids=["none", "empty", "named"]
)
def test_wait_indefinitely_stays_pending_and_arms_nothing(agent, config):
    filed = filed_with(agent, config)
    pause = pause_of(filed)
    assert filed["deadline"] is None and filed["timeoutPolicy"] == "WAIT_INDEFINITELY"
    assert pause.due_at is None and pause.schedule_id is None
    with at(pause.paused_at + timedelta(days=400)):
        assert fire_due_batch() == 0
        assert fire_timeout(str(pause.id)) == "no-op"
    assert read(agent, filed)["status"] == "PENDING"
    assert timeout_entries(filed) == []


def test_auto_approve_is_approved_by_the_timeout_and_claimable_once(agent):
    filed = filed_with(agent, {"timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": "PT15M"})
    pause = pause_of(filed)
    assert filed["deadline"] is not None and filed["timeoutPolicy"] == "AUTO_APPROVE"
    schedule = Schedule.objects.get(pk=pause.schedule_id)  # the backstop, armed with the filing
    assert (schedule.func, schedule.schedule_type) == (TIMER_FUNC, Schedule.ONCE)
    with at(pause.due_at - timedelta(seconds=1)):
        assert fire_due_batch() == 0
    assert read(agent, filed)["status"] == "PENDING"

    with at(pause.due_at + timedelta(milliseconds=100)):
        assert fire_due_batch() == 1
        body = read(agent, filed)
        claimed = client_for(agent).post(f"/approval-requests/{filed['id']}/claim", {}, format="json")
        again = client_for(agent).post(f"/approval-requests/{filed['id']}/claim", {}, format="json")

    assert body["status"] == "APPROVED" and body["deadline"] is None
    decision = body["decision"]
    assert (decision["verdict"], decision["decidedBy"], decision["automated"]) == (
        "APPROVED",
        "system:timeout",
        True,
    )
    assert body["grant"]["arguments"] == filing()["action"]["arguments"] and body["grant"]["claimed"] is False
    assert claimed.status_code == 200, claimed.content
    assert claimed.json()["grant"]["token"]
    assert again.json()["code"] == "OUTCOME_UNKNOWN"
    assert timeout_entries(filed) == [("APPROVED", "system:timeout", True)]
    assert not Schedule.objects.filter(pk=pause.schedule_id).exists()
    assert list(
        WebhookDelivery.objects.filter(approval_request_id=filed["id"]).values_list("event", flat=True)
    ) == ["approval_request.decided"]


def test_auto_reject_is_rejected_by_the_timeout_and_grants_nothing(agent):
    filed = filed_with(agent, {"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT1H"})
    pause = pause_of(filed)
    with at(pause.due_at):
        assert fire_due_batch() == 1
    body = read(agent, filed)
    assert body["status"] == "REJECTED" and body["grant"] is None
    assert (body["decision"]["decidedBy"], body["decision"]["automated"]) == ("system:timeout", True)
    claim = client_for(agent).post(f"/approval-requests/{filed['id']}/claim", {}, format="json")
    assert (claim.status_code, claim.json()["code"]) == (409, "WRONG_STATE")
    assert timeout_entries(filed) == [("REJECTED", "system:timeout", True)]


def test_abort_expires_the_request(agent):
    filed = filed_with(agent, {"timeoutPolicy": "ABORT", "approvalTimeout": "PT30S"})
    pause = pause_of(filed)
    with at(pause.due_at + timedelta(seconds=1)):
        assert (
            fire_timeout(str(pause.id)) != "no-op"
        )  # the backstop schedule's task, as the q-cluster runs it
        assert fire_timeout(str(pause.id)) == "no-op"
        assert fire_due_batch() == 0
    body = read(agent, filed)
    assert body["status"] == "EXPIRED" and body["grant"] is None and body["deadline"] is None
    assert Pause.objects.get(pk=pause.pk).status == PauseStatus.CANCELLED
    assert timeout_entries(filed) == [("CANCELLED", "system:timeout", True)]
    claim = client_for(agent).post(f"/approval-requests/{filed['id']}/claim", {}, format="json")
    assert claim.json()["code"] == "WRONG_STATE"
    cancel = client_for(agent).post(f"/approval-requests/{filed['id']}/cancel")
    assert (cancel.status_code, cancel.json()["currentState"]) == (409, "EXPIRED")
    assert list(
        WebhookDelivery.objects.filter(approval_request_id=filed["id"]).values_list("event", flat=True)
    ) == ["approval_request.expired"]


@pytest.mark.parametrize("policy", ["AUTO_APPROVE", "AUTO_REJECT", "ABORT"])
def test_a_reviewers_decision_first_leaves_the_timeout_nothing_to_do(agent, approver, policy):
    filed = filed_with(agent, {"timeoutPolicy": policy, "approvalTimeout": "PT5M"})
    pause = pause_of(filed)
    decided = client_for(approver).post(
        f"/approval-requests/{filed['id']}/decision", {"verdict": "REJECTED", "note": "no"}, format="json"
    )
    assert decided.status_code == 200, decided.content
    with at(pause.due_at + timedelta(minutes=5)):
        assert fire_timeout(str(pause.id)) == "no-op"
        assert fire_due_batch() == 0
    assert ApprovalRequest.objects.get(pk=filed["id"]).status == "REJECTED"
    assert timeout_entries(filed) == [("REJECTED", "approver", False)]


def test_each_request_keeps_its_own_deadline(agent):
    short = filed_with(agent, {"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT1M"}, key="short")
    long = filed_with(agent, {"timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": "PT2H"}, key="long")
    forever = filed_with(agent, None, key="forever")
    with at(pause_of(short).due_at + timedelta(seconds=1)):
        assert fire_due_batch() == 1
    assert [ApprovalRequest.objects.get(pk=f["id"]).status for f in (short, long, forever)] == [
        "REJECTED",
        "PENDING",
        "PENDING",
    ]
    with at(pause_of(long).due_at + timedelta(seconds=1)):
        assert fire_due_batch() == 1
    assert [ApprovalRequest.objects.get(pk=f["id"]).status for f in (short, long, forever)] == [
        "REJECTED",
        "APPROVED",
        "PENDING",
    ]


@pytest.mark.parametrize(
    ("config", "fields"),
    [
        ({"timeoutPolicy": "AUTO_APPROVE"}, {"hitlConfig.approvalTimeout"}),
        ({"timeoutPolicy": "ABORT", "approvalTimeout": "15 minutes"}, {"hitlConfig.approvalTimeout"}),
        ({"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "-PT5M"}, {"hitlConfig.approvalTimeout"}),
        ({"timeoutPolicy": "SOMETIMES", "approvalTimeout": "PT5M"}, {"hitlConfig.timeoutPolicy"}),
        ({"timeoutPolicy": 5}, {"hitlConfig.timeoutPolicy"}),
        ({"approvalTimout": "PT5M"}, {"hitlConfig.approvalTimout"}),
        (
            {"allowSelfApproval": "no", "allowEdit": 1, "allowRespond": None, "granularity": "TASK"},
            {"hitlConfig.allowSelfApproval", "hitlConfig.allowEdit", "hitlConfig.granularity"},
        ),
        ([], {"hitlConfig"}),
    ],
    ids=[
        "finite-without-duration",
        "not-iso",
        "negative",
        "unknown-policy",
        "policy-not-text",
        "misspelled-key",
        "not-booleans-and-unknown-key",
        "not-an-object",
    ],
)
def test_a_bad_hitl_config_is_a_400_naming_each_field_by_its_path(agent, config, fields):
    answer = client_for(agent).post("/approval-requests", filing(hitlConfig=config), format="json")

    assert answer.status_code == 400, answer.content
    named = {error["field"] for error in answer.json()["errors"]}
    assert named == fields, answer.json()
    assert all(field in answer.json()["detail"] for field in fields), answer.json()["detail"]
    assert ApprovalRequest.objects.count() == 0 and Pause.objects.count() == 0
