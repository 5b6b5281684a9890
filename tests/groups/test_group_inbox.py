"""The group inboxes, one group's and every group's: pending group pauses, owner-scoped inside the query
before the limit, what is due first, bounded, and served by the partial indexes of pending group pauses."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from approvals.models import Pause
from approvals.selectors import pending_pauses_for
from harnesses.factories import paused_conversation
from harnesses.members import answering, discuss, group

pytestmark = pytest.mark.django_db

GATED = [{"name": "Opinions", "type": "OPINION", "requiresApproval": True}]
ROW_FIELDS = {
    "pauseId",
    "surface",
    "conversationId",
    "agentId",
    "groupId",
    "ownerId",
    "userId",
    "pausedAt",
    "deadline",
    "pauseReason",
    "pauseType",
    "timeoutPolicy",
    "approvalTimeout",
    "toolNames",
}


def gated_group(**top) -> str:
    return group([(answering("pat", "Ship it."), "Optimist")], GATED, **top)


def inbox(client, group_id: str | None = None, query: str = "", expected: int = 200):
    path = f"/groups/{group_id}/conversations/pending-approvals" if group_id else "/groups/pending-approvals"
    response = client.get(path + query)
    assert response.status_code == expected, response.content
    return response.json()


def group_pauses(
    owner: User, count: int, *, group_id: uuid.UUID, start_minutes_ago: int = 1000
) -> list[Pause]:
    """Pending PHASE pauses of ``count`` discussions of a group (rows only: for volume and ordering)."""
    now = timezone.now()
    return Pause.objects.bulk_create(
        [
            Pause(
                surface="group",
                kind="PHASE",
                subject_type="discussion",
                subject_id=uuid.uuid4(),
                group_id=group_id,
                owner=owner,
                reason="r",
                paused_at=now - timedelta(minutes=start_minutes_ago - i),
            )
            for i in range(count)
        ]
    )


def test_a_row_is_the_inbox_contract_with_the_discussion_as_conversation_id(alice_client, approver_client):
    group_id = gated_group(hitlConfig={"timeoutPolicy": "ABORT", "approvalTimeout": "PT1H"})
    paused = discuss(alice_client, group_id)

    (row,) = inbox(approver_client, group_id)

    assert set(row) == ROW_FIELDS
    pause = Pause.objects.get(subject_id=paused["discussionId"])
    assert (row["pauseId"], row["conversationId"], row["groupId"]) == (
        str(pause.id),
        paused["discussionId"],
        group_id,
    )
    assert (row["surface"], row["pauseType"], row["agentId"], row["ownerId"], row["toolNames"]) == (
        "group",
        "PHASE",
        None,
        "alice",
        [],
    )
    assert row["pauseReason"] == "Requires human approval (PHASE) — phase: Opinions"
    assert (row["timeoutPolicy"], row["approvalTimeout"]) == ("ABORT", "PT1H")
    assert row["deadline"] is not None
    status = approver_client.get(
        f"/groups/{group_id}/conversations/{paused['discussionId']}/approval-status"
    ).json()
    assert (row["pausedAt"], row["deadline"], row["pauseReason"]) == (
        status["pausedAt"],
        status["deadline"],
        status["reason"],
    )  # the same pause reads the same in both
    assert inbox(approver_client) == [row]


def test_one_groups_inbox_lists_only_its_pauses_and_every_groups_inbox_lists_no_1_1_pause(
    alice_client, approver_client
):
    first, second = gated_group(), gated_group()
    in_first = [discuss(alice_client, first)["discussionId"] for _ in range(2)]
    in_second = discuss(alice_client, second)["discussionId"]
    one_to_one = paused_conversation(alice_client)

    assert [r["conversationId"] for r in inbox(approver_client, first)] == in_first
    assert [r["conversationId"] for r in inbox(approver_client, second)] == [in_second]
    assert [r["conversationId"] for r in inbox(approver_client)] == [*in_first, in_second]
    assert [r["conversationId"] for r in approver_client.get("/agents/pending-approvals").json()] == [
        one_to_one
    ]  # and the 1:1 inbox lists no group pause


def test_decided_and_cancelled_discussions_leave_the_inboxes(alice_client, approver_client):
    group_id = gated_group()
    decided, cancelled, waiting = (discuss(alice_client, group_id) for _ in range(3))
    base = f"/groups/{group_id}/conversations"
    approve = {"decision": {"verdict": "APPROVED"}}
    assert (
        approver_client.post(
            f"{base}/{decided['discussionId']}/approve?wait=60", approve, format="json"
        ).status_code
        == 200
    )
    assert alice_client.post(f"{base}/{cancelled['discussionId']}/cancel").status_code == 200

    assert [r["conversationId"] for r in inbox(approver_client, group_id)] == [waiting["discussionId"]]
    assert [r["conversationId"] for r in inbox(approver_client)] == [waiting["discussionId"]]


def test_plain_users_see_their_own_and_approvers_and_admins_every_one_oldest_first(
    alice, bob, alice_client, bob_client, approver_client, admin_client
):
    group_id = uuid.UUID(gated_group())
    bobs = group_pauses(bob, 3, group_id=group_id, start_minutes_ago=100)
    alices = group_pauses(alice, 3, group_id=group_id, start_minutes_ago=50)

    for path_group in (str(group_id), None):
        assert [r["pauseId"] for r in inbox(alice_client, path_group)] == [str(p.id) for p in alices]
        assert [r["pauseId"] for r in inbox(bob_client, path_group)] == [str(p.id) for p in bobs]
        for client in (approver_client, admin_client):
            rows = inbox(client, path_group)
            assert [r["pauseId"] for r in rows] == [str(p.id) for p in [*bobs, *alices]]
            assert [r["pausedAt"] for r in rows] == sorted(r["pausedAt"] for r in rows)


def test_a_personal_group_inbox_is_never_starved_by_other_users_backlog(alice, bob, alice_client):
    group_id = uuid.UUID(gated_group())
    group_pauses(bob, 50, group_id=group_id, start_minutes_ago=5000)  # older: first in line unscoped
    mine = group_pauses(alice, 2, group_id=group_id, start_minutes_ago=10)

    for path_group in (str(group_id), None):
        rows = inbox(alice_client, path_group, "?limit=1")
        assert [r["pauseId"] for r in rows] == [str(mine[0].id)]


@pytest.mark.parametrize(("asked", "expected"), [("0", 1), ("-5", 1), ("3", 3), ("5000", 12)])
def test_the_limit_is_clamped_to_1_through_1000_like_the_1_1_inbox(
    approver, approver_client, asked, expected
):
    group_id = uuid.UUID(gated_group())
    group_pauses(approver, 12, group_id=group_id)

    assert len(inbox(approver_client, str(group_id), f"?limit={asked}")) == expected
    assert len(inbox(approver_client, None, f"?limit={asked}")) == expected


@pytest.mark.parametrize("query", ["?limit=abc", "?limit=null&limit=null", "?limit=3&limit=4", "?limit="])
def test_a_limit_that_is_not_one_integer_is_a_400_naming_limit_like_the_1_1_inbox(approver_client, query):
    group_id = gated_group()

    for path_group in (group_id, None):
        body = inbox(approver_client, path_group, query, expected=400)
        assert [error["field"] for error in body["errors"]] == ["limit"]


def test_the_default_limit_is_100_as_in_eddi(approver, approver_client):
    group_id = uuid.UUID(gated_group())
    group_pauses(approver, 105, group_id=group_id)

    assert len(inbox(approver_client, str(group_id))) == 100
    assert len(inbox(approver_client)) == 100


def test_an_unknown_malformed_or_deleted_group_is_404_for_everyone_alike(
    alice, alice_client, approver_client, admin_client
):
    deleted = gated_group()
    group_pauses(alice, 1, group_id=uuid.UUID(deleted))
    assert admin_client.delete(f"/groupstore/groups/{deleted}").status_code == 204

    for client in (alice_client, approver_client, admin_client):
        answers = [
            inbox(client, group_id, expected=404) for group_id in (str(uuid.uuid4()), "not-a-uuid", deleted)
        ]
        assert all(answer == answers[0] for answer in answers) and answers[0]["code"] == "NOT_FOUND"
    assert len(inbox(approver_client)) == 1  # a deleted group's pending pause stays in every group's inbox


def test_a_known_group_without_pauses_of_yours_is_an_empty_list(bob, alice_client, bob_client):
    group_id = gated_group()
    discuss(alice_client, group_id)

    assert inbox(bob_client, group_id) == []
    assert inbox(bob_client) == []


def test_anonymous_callers_are_401(anon_client):
    group_id = gated_group()
    for path in (f"/groups/{group_id}/conversations/pending-approvals", "/groups/pending-approvals"):
        assert anon_client.get(path).status_code == 401


def test_each_inbox_is_a_fixed_number_of_queries_whatever_the_page_size(
    alice, approver_client, django_assert_max_num_queries
):
    group_id = uuid.UUID(gated_group())
    group_pauses(alice, 40, group_id=group_id)
    inbox(approver_client)  # warm the auth caches
    with django_assert_max_num_queries(4):  # token auth + groups + the inbox itself
        assert len(inbox(approver_client, None, "?limit=40")) == 40
    with django_assert_max_num_queries(5):  # ... + the group
        assert len(inbox(approver_client, str(group_id), "?limit=40")) == 40


@pytest.mark.parametrize("per_group", [False, True], ids=["every-group", "one-group"])
def test_the_group_inboxes_are_served_by_the_pending_group_indexes(alice, approver, per_group):
    """A few thousand pending pauses, most of them 1:1: the group inboxes read only pending group pauses
    (without these indexes every group's walked the 1:1 backlog and one group's read every pending pause)."""
    owners = User.objects.bulk_create([User(username=f"user{i}") for i in range(50)])
    now = timezone.now()
    Pause.objects.bulk_create(
        [
            Pause(
                surface="regular",
                kind="RULE",
                subject_type="conversation",
                subject_id=uuid.uuid4(),
                owner=owners[i % len(owners)],
                reason="r",
                paused_at=now - timedelta(minutes=10_000 + i),  # older than every group pause
            )
            for i in range(4000)
        ]
    )
    groups = [uuid.uuid4() for _ in range(10)]
    for i, group_id in enumerate(groups):
        group_pauses(owners[i], 100, group_id=group_id)
    queryset = pending_pauses_for(
        approver, limit=200, surface="group", group_id=groups[0] if per_group else None
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE approvals_pause")
    plan = queryset.explain()

    assert "Seq Scan on approvals_pause " not in plan, plan  # the pauses, not their routes
    if per_group:
        assert "pause_pending_per_group" in plan, plan
    else:  # either index of pending group pauses: the two hold the same rows, the planner picks by cost
        assert "pause_pending_group_inbox" in plan or "pause_pending_per_group" in plan, plan


@pytest.mark.parametrize("own", [False, True], ids=["approver", "owner"])
def test_the_1to1_inbox_is_not_slowed_by_a_backlog_of_group_pauses(alice, approver, own):
    """Thousands of older pending group pauses, a few 1:1 ones: the 1:1 inbox reads only pending 1:1
    pauses (with the all-surface indexes alone it scanned or walked the group backlog: bench G2)."""
    owners = User.objects.bulk_create([User(username=f"user{i}") for i in range(20)])
    now = timezone.now()
    Pause.objects.bulk_create(
        [
            Pause(
                surface="regular",
                kind="RULE",
                subject_type="conversation",
                subject_id=uuid.uuid4(),
                owner=alice if i % 2 else owners[i % len(owners)],
                reason="r",
                paused_at=now - timedelta(minutes=i),
            )
            for i in range(20)
        ]
    )
    for owner in [alice, *owners]:  # alice owns a backlog of group pauses too
        group_pauses(owner, 200, group_id=uuid.uuid4())
    Pause.objects.filter(surface="group").update(paused_at=now - timedelta(days=30))
    queryset = pending_pauses_for(alice if own else approver, limit=200, surface="regular")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE approvals_pause")
    plan = queryset.explain()

    assert "Seq Scan on approvals_pause " not in plan, plan  # the pauses, not their routes
    if own:
        assert "pause_pending_regular_owner" in plan, plan
    else:  # either index of pending 1:1 pauses: the two hold the same rows, the planner picks by cost
        assert "pause_pending_regular_inbox" in plan or "pause_pending_regular_owner" in plan, plan
    assert len(queryset) == (10 if own else 20)
