"""Every inbox lists what is due first (approvals.selectors.due_first): by deadline, soonest first, the
pauses without a deadline after all those with one, then oldest first, then by id. A flood of pauses
without a deadline never hides one with a deadline: it is first on page 1 of the REST inboxes, the admin
inbox, the group inboxes and the MCP list tools."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from approvals.models import Pause
from mcp_surface import conversation_tools, group_tools
from mcp_surface.server import _call
from tests.groups.test_group_inbox import gated_group

pytestmark = pytest.mark.django_db

FLOOD = 1000


def pauses(owner: User, count: int, *, surface: str = "regular", group_id=None, **fields) -> list[Pause]:
    """``count`` pending pauses of ``owner``, each a minute older than the next, the newest a minute ago."""
    now = timezone.now()
    group = surface == "group"
    return Pause.objects.bulk_create(
        [
            Pause(
                surface=surface,
                kind="PHASE" if group else "RULE",
                subject_type="discussion" if group else "conversation",
                subject_id=uuid.uuid4(),
                group_id=group_id,
                owner=owner,
                reason="r",
                paused_at=now - timedelta(minutes=count - i),
                **fields,
            )
            for i in range(count)
        ]
    )


def flood_then_one_due(owner: User, *, surface: str = "regular", group_id=None) -> Pause:
    """FLOOD pauses without a deadline, then, newest of all, one due in an hour: the one to see first."""
    pauses(owner, FLOOD, surface=surface, group_id=group_id)
    (due,) = Pause.objects.bulk_create(
        [
            Pause(
                surface=surface,
                kind="PHASE" if surface == "group" else "RULE",
                subject_type="discussion" if surface == "group" else "conversation",
                subject_id=uuid.uuid4(),
                group_id=group_id,
                owner=owner,
                reason="due soon",
                timeout_policy="AUTO_REJECT",
                approval_timeout="PT1H",
                paused_at=timezone.now(),
                due_at=timezone.now() + timedelta(hours=1),
            )
        ]
    )
    return due


@pytest.fixture
def mcp_in_test_transaction(monkeypatch):
    monkeypatch.setattr("mcp_surface.server.close_old_connections", lambda: None)


def test_a_flood_without_deadlines_never_hides_a_due_pause_from_the_rest_inbox(
    alice, alice_client, approver_client
):
    due = flood_then_one_due(alice)

    for client in (approver_client, alice_client):
        rows = client.get("/agents/pending-approvals").json()
        assert len(rows) == 200
        assert rows[0]["pauseId"] == str(due.pk), rows[0]
        assert rows[0]["deadline"] is not None and all(row["deadline"] is None for row in rows[1:])
        assert client.get("/agents/pending-approvals?limit=1").json()[0]["pauseId"] == str(due.pk)


def test_a_flood_without_deadlines_never_hides_a_due_pause_from_the_admin_inbox(alice, approver):
    due = flood_then_one_due(alice)
    reviewer = Client()
    reviewer.force_login(approver)

    response = reviewer.get("/admin/approvals/pendingapproval/")

    assert response.status_code == 200
    shown = list(response.context["cl"].result_list)
    assert len(shown) == 50 and shown[0].pk == due.pk, shown[:3]


def test_a_flood_without_deadlines_never_hides_a_due_pause_from_the_group_inboxes(alice, approver_client):
    group_id = gated_group()
    due = flood_then_one_due(alice, surface="group", group_id=uuid.UUID(group_id))

    for path in (f"/groups/{group_id}/conversations/pending-approvals", "/groups/pending-approvals"):
        rows = approver_client.get(path).json()
        assert len(rows) == 100 and rows[0]["pauseId"] == str(due.pk), (path, rows[0])  # the default limit


def test_a_flood_without_deadlines_never_hides_a_due_pause_from_the_mcp_list_tools(
    alice, approver, mcp_in_test_transaction
):
    due = flood_then_one_due(alice)
    group_id = gated_group()
    group_due = flood_then_one_due(alice, surface="group", group_id=uuid.UUID(group_id))

    answers = {
        "list_pending_approvals": (_call(conversation_tools.list_pending_approvals, approver, {}), due),
        "list_group_pending_approvals": (
            _call(group_tools.list_group_pending_approvals, approver, {"group_id": group_id}),
            group_due,
        ),
        "list_all_group_pending_approvals": (
            _call(group_tools.list_all_group_pending_approvals, approver, {}),
            group_due,
        ),
    }
    for tool, (answer, first) in answers.items():
        assert not answer.is_error, (tool, answer.structured_content)
        assert answer.structured_content["approvals"][0]["pauseId"] == str(first.pk), tool


def test_the_order_is_deadline_soonest_first_then_none_then_oldest_then_id(alice, approver_client):
    now = timezone.now()
    at = now - timedelta(hours=1)
    later, sooner = now + timedelta(hours=2), now + timedelta(hours=1)
    rows = Pause.objects.bulk_create(
        [
            Pause(
                surface="regular",
                kind="RULE",
                subject_type="conversation",
                subject_id=uuid.uuid4(),
                owner=alice,
                reason=name,
                paused_at=paused_at,
                due_at=due_at,
            )
            for name, paused_at, due_at in [
                ("no deadline, newer", now, None),
                ("due later", at, later),
                ("no deadline, older", at - timedelta(minutes=5), None),
                ("due sooner, paused later", now, sooner),
                ("due sooner, paused earlier", at, sooner),
                ("due sooner, paused earlier, twin", at, sooner),
            ]
        ]
    )
    by_reason = {row.reason: row for row in rows}
    twins = sorted(
        [by_reason["due sooner, paused earlier"], by_reason["due sooner, paused earlier, twin"]],
        key=lambda row: row.pk,
    )

    listed = [row["pauseId"] for row in approver_client.get("/agents/pending-approvals").json()]

    expected = [
        *twins,
        by_reason["due sooner, paused later"],
        by_reason["due later"],
        by_reason["no deadline, older"],
        by_reason["no deadline, newer"],
    ]
    assert listed == [str(row.pk) for row in expected]
