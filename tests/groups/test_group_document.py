"""Save-time validation of group documents, and of a planner's task plan."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from conversations.agents import create_agent, delete_agent
from groups.demo_group import demo_group_document
from groups.group_document import NESTED_GROUPS, BadTaskPlan, parse_task_plan, validate_group_document
from groups.store import create_group
from harnesses.factories import account_bot

pytestmark = pytest.mark.django_db

DOCS = Path(__file__).resolve().parents[2] / "docs" / "groups.md"


@pytest.fixture
def members() -> list[str]:
    return [str(create_agent(document=account_bot(name=f"member-{n}")).agent_id) for n in range(3)]


def group(members: list[str], **top: Any) -> dict[str, Any]:
    return {
        "name": "panel",
        "members": [{"agentId": m} for m in members],
        "phases": [{"name": "Opinions", "type": "OPINION"}],
    } | top


def execute(members: list[str], *tasks: dict[str, Any], **phase: Any) -> dict[str, Any]:
    return group(members, phases=[{"name": "Do", "type": "EXECUTE", "tasks": list(tasks)} | phase])


def task(task_id: str, assignee: str, *depends: str) -> dict[str, Any]:
    return {"id": task_id, "description": f"do {task_id}", "assignee": assignee} | (
        {"dependsOn": list(depends)} if depends else {}
    )


def errors(doc: object) -> dict[str, str]:
    return {e.field: e.message for e in validate_group_document(doc).errors}


def test_a_minimal_group_is_valid(members):
    assert errors(group(members)) == {}


def test_every_error_is_reported_at_once_with_its_field_path(members):
    doc = group(members, protocol={"maxTurns": 0}, hitlConfig={"granularity": "STEP"})
    doc["name"] = ""
    doc["phases"].append({"name": "Opinions", "type": "VOTE", "repeats": 11})

    assert set(errors(doc)) == {
        "name",
        "protocol.maxTurns",
        "hitlConfig.granularity",
        "phases[1].name",
        "phases[1].type",
        "phases[1].repeats",
    }


def test_a_document_that_is_not_an_object_is_refused():
    assert errors([]) == {"": "the group document must be a JSON object"}


def test_unknown_keys_are_errors_with_a_near_miss_hint(members):
    doc = group(members, phase=[])
    doc["phases"][0]["requiresAproval"] = True
    found = errors(doc)

    assert "did you mean 'phases'?" in found["phase"]
    assert "did you mean 'requiresApproval'?" in found["phases[0].requiresAproval"]


def test_members_are_required_unique_live_agents(members):
    deleted = str(create_agent(document=account_bot(name="gone")).agent_id)
    delete_agent(agent_id=deleted)
    doc = group(members)
    doc["members"] += [{"agentId": members[0]}, {"agentId": deleted}, {"agentId": "nope"}, {"role": "x"}]
    found = errors(doc)

    assert found["members[3].agentId"].startswith(f"duplicate member '{members[0]}'")
    assert "unknown or deleted" in found["members[4].agentId"]
    assert "not an agent id" in found["members[5].agentId"]
    assert found["members[6].agentId"] == "is required"
    assert errors(group([])) == {"members": "must not be empty"}


def test_a_member_may_have_a_role_and_a_display_name_and_nothing_else(members):
    doc = group(members)
    doc["members"][0] |= {"role": "Critic", "displayName": "Carla"}
    assert errors(doc) == {}
    doc["members"][1] |= {"role": 5, "speakingOrder": 1}
    assert set(errors(doc)) == {"members[1].role", "members[1].speakingOrder"}


def test_a_group_as_member_is_refused_as_nested(members):
    inner = create_group(document=group(members, name="inner")).group_id
    doc = group(members)
    doc["members"].append({"agentId": str(inner)})

    assert errors(doc) == {"members[3].agentId": NESTED_GROUPS}


def test_phases_are_required_and_typed(members):
    assert errors(group(members, phases=[])) == {"phases": "must not be empty"}
    doc = group(members, phases=[{"type": "OPINION", "repeats": True, "requiresApproval": "yes"}])
    assert set(errors(doc)) == {"phases[0].name", "phases[0].repeats", "phases[0].requiresApproval"}


@pytest.mark.parametrize("repeats", [1, 10])
def test_repeats_from_one_to_ten_are_accepted(members, repeats):
    assert errors(group(members, phases=[{"name": "p", "type": "CHALLENGE", "repeats": repeats}])) == {}


@pytest.mark.parametrize("repeats", [0, 11, 1.5, "2"])
def test_other_repeats_are_refused(members, repeats):
    assert set(errors(group(members, phases=[{"name": "p", "type": "CHALLENGE", "repeats": repeats}]))) == {
        "phases[0].repeats"
    }


@pytest.mark.parametrize(
    ("max_turns", "ok"), [(1, True), (1000, True), (0, False), (1001, False), ("5", False)]
)
def test_max_turns_is_from_one_to_a_thousand(members, max_turns, ok):
    found = errors(group(members, protocol={"maxTurns": max_turns}))
    assert (found == {}) is ok and (ok or set(found) == {"protocol.maxTurns"})


def test_an_execute_phase_needs_tasks_or_a_planner(members):
    doc = group(members, phases=[{"name": "Do", "type": "EXECUTE"}])
    assert "needs tasks, a planner" in errors(doc)["phases[0]"]
    assert set(errors(execute(members, planner=members[0]))) == {"phases[0].tasks"}  # an empty list: no
    doc = group(members, phases=[{"name": "Do", "type": "EXECUTE", "planner": members[0]}])
    assert errors(doc) == {}  # a planner alone is enough


def test_tasks_ids_are_unique_and_their_assignees_are_members(members):
    found = errors(execute(members, task("a", members[0]), task("a", members[1]), task("b", "stranger")))

    assert found["phases[0].tasks[1].id"].startswith("duplicate task id 'a'")
    assert "is not a member" in found["phases[0].tasks[2].assignee"]


def test_a_planner_must_be_a_member(members):
    doc = group(members, phases=[{"name": "Do", "type": "EXECUTE", "planner": "someone"}])
    assert "is not a member" in errors(doc)["phases[0].planner"]


def test_dependencies_name_tasks_of_the_same_phase(members):
    doc = execute(members, task("a", members[0], "a"), task("b", members[0], "elsewhere"))
    found = errors(doc)

    assert "cannot depend on itself" in found["phases[0].tasks[0].dependsOn[0]"]
    assert "not a task of this list" in found["phases[0].tasks[1].dependsOn[0]"]


def test_a_dependency_cycle_is_refused_and_named(members):
    doc = execute(members, task("a", members[0], "c"), task("b", members[1], "a"), task("c", members[2], "b"))
    message = errors(doc)["phases[0].tasks"]

    assert "cycle" in message and re.search(r"(a|b|c) -> .* -> \1", message), message


def test_a_dependency_chain_without_cycle_is_valid(members):
    doc = execute(members, task("a", members[0]), task("b", members[1], "a"), task("c", members[2], "a", "b"))
    assert errors(doc) == {}


@pytest.mark.parametrize("phase_type", ["OPINION", "CHALLENGE", "SYNTHESIS"])
def test_only_an_execute_phase_has_tasks_or_a_planner(members, phase_type):
    doc = group(members, phases=[{"name": "p", "type": phase_type, "tasks": [], "planner": members[0]}])
    assert set(errors(doc)) == {"phases[0].tasks", "phases[0].planner"}


def test_hitl_config_takes_granularity_rejection_policy_and_the_duration_check(members):
    ok = {
        "granularity": "TASK",
        "onTaskRejection": "RETRY",
        "timeoutPolicy": "AUTO_APPROVE",
        "approvalTimeout": "PT10M",
    }
    assert errors(group(members, hitlConfig=ok)) == {}
    bad = {"granularity": "STEP", "onTaskRejection": "SKIP", "timeoutPolicy": "ABORT", "pauseReason": "x"}
    found = errors(group(members, hitlConfig=bad))

    assert set(found) == {
        "hitlConfig.granularity",
        "hitlConfig.onTaskRejection",
        "hitlConfig.approvalTimeout",
        "hitlConfig.pauseReason",  # a group's hitlConfig has no pauseReason
    }
    assert "requires an approvalTimeout" in found["hitlConfig.approvalTimeout"]


@pytest.mark.parametrize("timeout", ["30m", "PT0S", "-PT5M"])
def test_a_bad_or_non_positive_duration_is_refused(members, timeout):
    config = {"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": timeout}
    assert set(errors(group(members, hitlConfig=config))) == {"hitlConfig.approvalTimeout"}


def test_the_demo_group_is_valid(members):
    names = ("optimist-bot", "critic-bot", "moderator-bot")
    assert errors(demo_group_document(dict(zip(names, members, strict=True)))) == {}


def test_the_example_in_docs_groups_md_is_valid(members):
    """The first ```json block of docs/groups.md, with its member ids replaced by agents that exist."""
    example = json.loads(re.search(r"```json\n(.*?)\n```", DOCS.read_text(), re.DOTALL).group(1))
    ids = sorted({m["agentId"] for m in example["members"]})
    text = json.dumps(example)
    for placeholder, agent_id in zip(ids, members, strict=True):
        text = text.replace(placeholder, agent_id)
    assert errors(json.loads(text)) == {}


# --- a planner's task plan -----------------------------------------------------------------------------


def test_a_plan_is_an_array_or_an_object_of_tasks_optionally_fenced():
    plan = [
        {"id": "a", "description": "draft", "assignee": "m1"},
        {"id": "b", "description": "review", "assignee": "m2", "dependsOn": ["a"]},
    ]

    assert parse_task_plan(json.dumps(plan), members=["m1", "m2"]) == plan
    assert parse_task_plan(json.dumps({"tasks": plan}), members=["m1", "m2"]) == plan
    assert parse_task_plan(f"```json\n{json.dumps(plan)}\n```", members=["m1", "m2"]) == plan


def test_a_plan_that_is_not_json_is_a_clear_error():
    with pytest.raises(BadTaskPlan, match="the planner's task plan is invalid: not JSON"):
        parse_task_plan("I think we should first…", members=["m1"])


@pytest.mark.parametrize("plan", ['{"steps": []}', '"a"', "[]"])
def test_a_plan_of_the_wrong_shape_is_refused(plan):
    with pytest.raises(BadTaskPlan):
        parse_task_plan(plan, members=["m1"])


def test_a_plan_is_checked_with_the_task_rules_naming_every_problem():
    plan = [
        {"id": "a", "description": "draft", "assignee": "m9", "dependsOn": ["b"]},
        {"id": "b", "description": "", "assignee": "m1", "dependsOn": ["a"]},
        {"id": "a", "description": "again", "assignee": "m1", "extra": 1},
    ]
    with pytest.raises(BadTaskPlan) as raised:
        parse_task_plan(json.dumps(plan), members=["m1"])

    fields = {e.field for e in raised.value.errors}
    assert {"tasks[0].assignee", "tasks[1].description", "tasks[2].id", "tasks[2].extra"} <= fields
    assert "tasks[0].assignee" in str(raised.value)
