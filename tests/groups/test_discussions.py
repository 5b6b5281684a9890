"""Running a group discussion: the members' turns through the 1:1 engine, EXECUTE tasks, the turn
budget, a member's own pause, the fail-closed refusals, and who may read a discussion."""

from __future__ import annotations

import json

import pytest

from approvals.models import AuditEntry, Pause, PauseStatus, SubjectType, Verdict
from conversations.agents import create_agent
from conversations.models import Conversation, ConversationState
from groups.demo_group import demo_member_document
from groups.member_turns import MEMBER_PAUSE_NOTE
from groups.models import GroupConversation
from harnesses.members import answering, asked, discuss, echoing, group, pausing, said
from tests.hitl_project.scrape import scrape, value

pytestmark = pytest.mark.django_db

SKIP_METRIC = "hitl_group_member_pause_skipped_total"


# --- phases and rounds --------------------------------------------------------------------------------


def test_every_member_speaks_in_order_in_every_round_of_every_phase(alice, alice_client):
    pat, carla = answering("pat", "Ship it."), answering("carla", "Not on a Friday.")
    group_id = group(
        [(pat, "Optimist"), (carla, "Critic")],
        [
            {"name": "Opinions", "type": "OPINION"},
            {"name": "Challenge", "type": "CHALLENGE", "repeats": 2},
            {"name": "Decision", "type": "SYNTHESIS"},
        ],
    )

    body = discuss(alice_client, group_id)

    assert body["state"] == "COMPLETED"
    assert body["turnCount"] == 8 and body["phaseIndex"] == 2 and body["tasks"] == []
    assert said(body) == [
        ("Opinions", "Optimist", "OK", "Ship it."),
        ("Opinions", "Critic", "OK", "Not on a Friday."),
        ("Challenge", "Optimist", "OK", "Ship it."),
        ("Challenge", "Critic", "OK", "Not on a Friday."),
        ("Challenge", "Optimist", "OK", "Ship it."),
        ("Challenge", "Critic", "OK", "Not on a Friday."),
        ("Decision", "Optimist", "OK", "Ship it."),
        ("Decision", "Critic", "OK", "Not on a Friday."),
    ]
    assert [e["round"] for e in body["transcript"]] == [1, 1, 1, 1, 2, 2, 1, 1]
    assert [e["member"] for e in body["transcript"][:2]] == [pat, carla]
    discussion = GroupConversation.objects.get(pk=body["discussionId"])
    conversations = Conversation.objects.filter(pk__in=discussion.member_conversations.values())
    assert {str(c.agent_id) for c in conversations} == {pat, carla}
    assert {c.owner_id for c in conversations} == {alice.pk}
    assert {c.environment for c in conversations} == {"production"}
    assert alice_client.get(f"/groups/{group_id}/conversations/{body['discussionId']}").json() == body


def test_a_discussion_is_audited_when_it_starts_and_when_it_ends(alice_client):
    group_id = group([(answering("pat", "Yes."), "Optimist")], [{"name": "Opinions", "type": "OPINION"}])

    body = discuss(alice_client, group_id)

    entries = AuditEntry.objects.filter(subject_type=SubjectType.DISCUSSION, subject_id=body["discussionId"])
    assert [(e.verb, e.actor) for e in entries.order_by("sequence")] == [
        ("hitl.discussion.started", "alice"),
        ("hitl.discussion.finished", "system:group"),
    ]
    assert entries.order_by("sequence").last().detail == {"state": "COMPLETED", "turnCount": 1}


def test_a_member_is_told_the_question_the_phase_and_what_was_said_before(alice_client):
    pat, echo = answering("pat", "Ship it."), echoing("echo")
    group_id = group(
        [(pat, "Optimist"), (echo, "Scribe")],
        [{"name": "Opinions", "type": "OPINION"}, {"name": "Wrap-up", "type": "SYNTHESIS"}],
    )

    body = discuss(alice_client, group_id, "Friday release?")

    told = body["transcript"][1]["content"]
    assert told.startswith("Question: Friday release?\nPhase: Opinions (OPINION)\nYour role: Scribe\n")
    assert "- [Opinions] Optimist: Ship it." in told
    last = body["transcript"][3]["content"]
    assert "Phase: Wrap-up (SYNTHESIS)" in last and "- [Opinions] Scribe: Question: Friday release?" in last


# --- EXECUTE --------------------------------------------------------------------------------------------


def test_tasks_run_once_their_dependencies_are_completed_with_their_results(alice_client):
    echo = echoing("echo")
    group_id = group(
        [(echo, "Engineer")],
        [
            {
                "name": "Ship",
                "type": "EXECUTE",
                "tasks": [
                    {"id": "tag", "description": "Tag the release", "assignee": echo, "dependsOn": ["notes"]},
                    {"id": "notes", "description": "Write the notes", "assignee": echo},
                ],
            }
        ],
    )

    body = discuss(alice_client, group_id)

    assert body["state"] == "COMPLETED" and body["turnCount"] == 2
    notes, tag = body["tasks"][1], body["tasks"][0]
    assert [notes["status"], tag["status"]] == ["COMPLETED", "COMPLETED"]
    assert "Your task (notes): Write the notes" in notes["result"]
    assert "Your task (tag): Tag the release" in tag["result"]
    assert "- notes: " + notes["result"].splitlines()[0] in tag["result"]  # ran after notes, with its result
    assert body["transcript"] == []


def test_a_task_depending_on_a_failed_task_fails_without_running(alice_client):
    echo, shy = echoing("echo"), pausing("shy")
    group_id = group(
        [(echo, "Engineer"), (shy, "Approver")],
        [
            {
                "name": "Ship",
                "type": "EXECUTE",
                "tasks": [
                    {"id": "sign", "description": "Sign it off", "assignee": shy},
                    {"id": "tag", "description": "Tag it", "assignee": echo, "dependsOn": ["sign"]},
                    {"id": "announce", "description": "Announce it", "assignee": echo, "dependsOn": ["tag"]},
                    {"id": "notes", "description": "Write notes", "assignee": echo},
                ],
            }
        ],
    )

    body = discuss(alice_client, group_id)

    assert body["state"] == "COMPLETED"
    assert [(t["id"], t["status"]) for t in body["tasks"]] == [
        ("sign", "FAILED"),
        ("tag", "FAILED"),
        ("announce", "FAILED"),
        ("notes", "COMPLETED"),
    ]
    assert body["tasks"][1]["note"] == "not run: it depends on failed task sign"
    assert body["tasks"][1]["result"] is None
    assert body["turnCount"] == 2  # sign and notes; tag and announce never ran
    assert [(e["task"], e["status"], e["note"]) for e in body["transcript"]] == [
        ("sign", "SKIPPED", MEMBER_PAUSE_NOTE)
    ]


def test_a_spent_turn_budget_fails_the_discussion(alice_client):
    echo = echoing("echo")
    group_id = group(
        [(echo, "Engineer")],
        [
            {"name": "Opinions", "type": "OPINION"},
            {
                "name": "Ship",
                "type": "EXECUTE",
                "tasks": [
                    {"id": "a", "description": "First", "assignee": echo},
                    {"id": "b", "description": "Second", "assignee": echo, "dependsOn": ["a"]},
                ],
            },
        ],
        protocol={"maxTurns": 2},
    )

    body = discuss(alice_client, group_id)

    assert body["state"] == "FAILED" and body["turnCount"] == 2
    assert [(t["id"], t["status"]) for t in body["tasks"]] == [("a", "COMPLETED"), ("b", "PENDING")]
    last = body["transcript"][-1]
    assert (last["status"], last["member"], last["phase"]) == ("ERROR", None, "Ship")
    assert last["note"] == "turn budget exhausted (protocol.maxTurns = 2)"


def test_a_planners_task_list_is_run(alice_client):
    echo = echoing("echo")
    plan = [
        {"id": "draft", "description": "Draft it", "assignee": echo},
        {"id": "polish", "description": "Polish it", "assignee": echo, "dependsOn": ["draft"]},
    ]
    planner = answering("planner", json.dumps(plan))
    group_id = group(
        [(planner, "Planner"), (echo, "Engineer")],
        [{"name": "Work", "type": "EXECUTE", "planner": planner}],
    )

    body = discuss(alice_client, group_id)

    assert body["state"] == "COMPLETED" and body["turnCount"] == 3
    assert [(t["id"], t["assignee"], t["status"]) for t in body["tasks"]] == [
        ("draft", echo, "COMPLETED"),
        ("polish", echo, "COMPLETED"),
    ]
    assert said(body) == [("Work", "Planner", "OK", json.dumps(plan))]


def test_a_bad_task_plan_fails_the_discussion_naming_the_problem(alice_client):
    planner = answering("planner", '[{"id": "x", "description": "Do it", "assignee": "nobody"}]')
    group_id = group([(planner, "Planner")], [{"name": "Work", "type": "EXECUTE", "planner": planner}])

    body = discuss(alice_client, group_id)

    assert body["state"] == "FAILED" and body["tasks"] == []
    error = body["transcript"][-1]
    assert error["status"] == "ERROR" and error["member"] is None
    assert error["note"].startswith("the planner's task plan is invalid: tasks[0].assignee: 'nobody'")


# --- a member's own pause and errors -------------------------------------------------------------------


def test_a_member_that_pauses_is_skipped_and_its_pause_cancelled_by_the_group(alice_client):
    pat, shy = answering("pat", "Ship it."), pausing("shy")
    group_id = group([(shy, "Approver"), (pat, "Optimist")], [{"name": "Opinions", "type": "OPINION"}])
    before = scrape()

    body = discuss(alice_client, group_id)

    assert value(scrape(), SKIP_METRIC) - value(before, SKIP_METRIC) == 1
    assert body["state"] == "COMPLETED"
    assert said(body) == [("Opinions", "Approver", "SKIPPED", ""), ("Opinions", "Optimist", "OK", "Ship it.")]
    assert body["transcript"][0]["note"] == MEMBER_PAUSE_NOTE
    conversation_id = GroupConversation.objects.get(pk=body["discussionId"]).member_conversations[shy]
    pause = Pause.objects.get(subject_type=SubjectType.CONVERSATION, subject_id=conversation_id)
    assert (pause.status, pause.verdict, pause.decided_by, pause.automated) == (
        PauseStatus.CANCELLED,
        Verdict.CANCELLED,
        "system:group",
        True,
    )
    cancelled = AuditEntry.objects.get(subject_id=conversation_id, verb="hitl.approval")
    assert (cancelled.actor, cancelled.verdict, cancelled.automated) == ("system:group", "CANCELLED", True)
    assert Conversation.objects.get(pk=conversation_id).state == ConversationState.EXECUTION_INTERRUPTED


def test_a_member_skipped_in_one_phase_speaks_again_in_the_next(alice_client):
    shy = pausing("shy")
    group_id = group(
        [(shy, "Approver")],
        [{"name": "Opinions", "type": "OPINION"}, {"name": "Wrap-up", "type": "SYNTHESIS"}],
    )

    body = discuss(alice_client, group_id)

    assert [e["status"] for e in body["transcript"]] == ["SKIPPED", "SKIPPED"]
    assert Pause.objects.filter(status=PauseStatus.CANCELLED, decided_by="system:group").count() == 2


def test_a_member_whose_turn_raises_is_an_error_entry_and_the_discussion_goes_on(alice_client):
    quitter, pat = asked("quitter", "STOP_CONVERSATION"), answering("pat", "Ship it.")
    group_id = group(
        [(quitter, "Quitter"), (pat, "Optimist")],
        [{"name": "Opinions", "type": "OPINION"}, {"name": "Wrap-up", "type": "SYNTHESIS"}],
    )

    body = discuss(alice_client, group_id)

    # Its first turn ended its conversation (STOP_CONVERSATION stops before the output task), so its
    # next turn is refused (WRONG_STATE inside).
    assert body["state"] == "COMPLETED"
    assert said(body) == [
        ("Opinions", "Quitter", "OK", ""),
        ("Opinions", "Optimist", "OK", "Ship it."),
        ("Wrap-up", "Quitter", "ERROR", ""),
        ("Wrap-up", "Optimist", "OK", "Ship it."),
    ]
    assert body["transcript"][2]["note"] == "Conversation has ended (current state: ENDED)"


# --- refusals: fail closed, nothing created -----------------------------------------------------------


def test_an_undeployed_member_is_refused_by_name_and_nothing_is_created(alice_client):
    pat = answering("pat", "Ship it.")
    idle = str(create_agent(document=demo_member_document("idle", "zzz")).agent_id)
    group_id = group([(pat, "Optimist"), (idle, "Sleeper")], [{"name": "Opinions", "type": "OPINION"}])

    problem = discuss(alice_client, group_id, status=409)

    assert problem["code"] == "NOT_DEPLOYED"
    assert idle in problem["detail"] and "Sleeper" in problem["detail"]
    assert not GroupConversation.objects.exists() and not Conversation.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "question"),
        ({"question": ""}, "question"),
        ({"question": 5}, "question"),
        ({"question": "x", "q": 1}, "q"),
    ],
)
def test_a_bad_start_body_is_a_400_naming_the_field(alice_client, body, field):
    group_id = group([(answering("pat", "Yes."), "Optimist")], [{"name": "Opinions", "type": "OPINION"}])

    response = alice_client.post(f"/groups/{group_id}/conversations", body, format="json")

    assert response.status_code == 400, response.content
    assert field in [e["field"] for e in response.json()["errors"]]
    assert not GroupConversation.objects.exists()


def test_an_unknown_or_deleted_group_is_404(alice_client, admin_client):
    group_id = group([(answering("pat", "Yes."), "Optimist")], [{"name": "Opinions", "type": "OPINION"}])
    assert admin_client.delete(f"/groupstore/groups/{group_id}").status_code == 204

    assert discuss(alice_client, group_id, status=404)["code"] == "NOT_FOUND"
    assert discuss(alice_client, "not-a-uuid", status=404)["code"] == "NOT_FOUND"


# --- who may read a discussion ------------------------------------------------------------------------


def test_owner_admin_and_approver_read_a_discussion_and_nobody_else(
    alice_client, bob_client, admin_client, approver_client, anon_client
):
    group_id = group([(answering("pat", "Yes."), "Optimist")], [{"name": "Opinions", "type": "OPINION"}])
    discussion_id = discuss(alice_client, group_id)["discussionId"]
    url = f"/groups/{group_id}/conversations/{discussion_id}"

    assert alice_client.get(url).status_code == 200
    assert admin_client.get(url).status_code == 200
    assert approver_client.get(url).status_code == 200
    assert anon_client.get(url).status_code == 401
    refused = bob_client.get(url)
    assert refused.status_code == 403 and refused.json()["code"] == "FORBIDDEN"


def test_a_discussion_read_through_another_group_is_refused_like_an_unknown_id(
    alice_client, bob_client, admin_client
):
    pat = answering("pat", "Yes.")
    group_id = group([(pat, "Optimist")], [{"name": "Opinions", "type": "OPINION"}])
    other_group = group([(pat, "Optimist")], [{"name": "Other", "type": "OPINION"}])
    discussion_id = discuss(alice_client, group_id)["discussionId"]
    unknown = "00000000-0000-4000-8000-000000000000"

    for client, status in ((alice_client, 403), (bob_client, 403), (admin_client, 404)):
        through_other = client.get(f"/groups/{other_group}/conversations/{discussion_id}")
        not_there = client.get(f"/groups/{group_id}/conversations/{unknown}")
        malformed = client.get(f"/groups/{group_id}/conversations/not-a-uuid")
        assert through_other.status_code == not_there.status_code == malformed.status_code == status
        assert through_other.json() == not_there.json() == malformed.json()
