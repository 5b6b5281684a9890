"""Save-time validation of a whole group document (docs/groups.md), and of a planner's task plan.

Like an agent document, nothing is executed: every error is reported at once under its full field path
(``phases[2].tasks[0].assignee``) and any error refuses the save. Unlike an agent document, an unknown
key is an error, not a warning: a misspelt ``requiresAproval`` would silently drop an approval gate.
Members are checked to be agents that exist and are not deleted; whether they are deployed is checked
when a discussion starts, since a deployment can change after the save.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection, Iterable
from typing import Any

from approvals.hitl_config import allow_self_approval_errors, timeout_errors
from approvals.routing import ROUTING_KEYS, routing_errors, routing_warnings
from common.body_rules import body_errors
from common.edit_distance import near_miss
from common.field_errors import FieldError, json_type
from conversations.document_fields import (
    IDENTIFIER,
    DocumentReport,
    child,
    expect_boolean,
    expect_choice,
    expect_list,
    expect_object,
    expect_objects,
    expect_string,
    expect_unique,
    readable_document,
)
from conversations.models import Agent
from groups.models import Group

NAME_MAX = 200
PHASE_TYPES = ("OPINION", "CHALLENGE", "SYNTHESIS", "EXECUTE")
EXECUTE = "EXECUTE"
GRANULARITIES = ("PHASE", "TASK")
TASK_REJECTION_POLICIES = ("FAIL", "RETRY")
REPEATS_RANGE = (1, 10)
MAX_TURNS_RANGE = (1, 1000)
DEFAULT_MAX_TURNS = 100
NESTED_GROUPS = "nested groups are not supported: a member must be an agent, not a group"

DOCUMENT_KEYS = ("name", "description", "members", "phases", "protocol", "hitlConfig")
MEMBER_KEYS = ("agentId", "role", "displayName")
PHASE_KEYS = ("name", "type", "description", "repeats", "requiresApproval", "tasks", "planner")
TASK_KEYS = ("id", "description", "assignee", "dependsOn")
PROTOCOL_KEYS = ("maxTurns",)
HITL_CONFIG_KEYS = (
    "granularity",
    "approvalTimeout",
    "timeoutPolicy",
    "onTaskRejection",
    "allowSelfApproval",
    *ROUTING_KEYS,
)


def validate_group_document(doc: object) -> DocumentReport:
    """Every error of ``doc``, each under its full field path; an empty report means it may be saved."""
    report = DocumentReport()
    doc = readable_document(report, doc, "group")
    if doc is None:
        return report
    _refuse_unknown_keys(report, doc, "", DOCUMENT_KEYS, "group")
    expect_string(report, doc.get("name"), "name", non_empty=True, max_length=NAME_MAX)
    expect_string(report, doc.get("description"), "description", required=False)
    members = _check_members(report, doc.get("members"))
    _check_phases(report, doc.get("phases"), members)
    protocol = expect_object(report, doc.get("protocol"), "protocol", required=False)
    if protocol is not None:
        _refuse_unknown_keys(report, protocol, "protocol", PROTOCOL_KEYS, "protocol")
        _expect_int(report, protocol.get("maxTurns"), "protocol.maxTurns", MAX_TURNS_RANGE)
    _check_hitl_config(report, doc.get("hitlConfig"))
    return report


def _refuse_unknown_keys(
    report: DocumentReport, obj: dict, path: str, known: tuple[str, ...], what: str
) -> None:
    for key in obj:
        if key in known:
            continue
        hint = near_miss(key, known) if isinstance(key, str) else None
        suggestion = f"did you mean '{hint}'? " if hint else ""
        report.error(
            child(path, key),
            f"'{key}' is not a {what} field ({suggestion}allowed: {', '.join(known)})",
        )


def _expect_int(report: DocumentReport, value: object, path: str, bounds: tuple[int, int]) -> None:
    low, high = bounds
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        report.error(path, f"must be a whole number from {low} to {high}, got {json_type(value)}")
    elif not low <= value <= high:
        report.error(path, f"must be from {low} to {high}, got {value}")


# --- members -------------------------------------------------------------------------------------------


def _check_members(report: DocumentReport, value: object) -> set[str]:
    """The well-formed agent ids of the members: the ids tasks and planners may name (an unknown agent is
    reported once, on its member, not again on each task assigned to it)."""
    entries = list(expect_objects(report, value, "members", non_empty=True))
    seen: dict[str, str] = {}
    for member, path in entries:
        _refuse_unknown_keys(report, member, path, MEMBER_KEYS, "member")
        expect_string(report, member.get("role"), child(path, "role"), required=False, max_length=NAME_MAX)
        expect_string(
            report, member.get("displayName"), child(path, "displayName"), required=False, max_length=NAME_MAX
        )
        agent_id = _agent_id(report, member.get("agentId"), child(path, "agentId"))
        expect_unique(report, agent_id, child(path, "agentId"), seen, "member")
    _check_agents_exist(report, seen)
    return set(seen)


def _agent_id(report: DocumentReport, value: object, path: str) -> str | None:
    text = expect_string(report, value, path, non_empty=True)
    if text is None:
        return None
    try:
        return str(uuid.UUID(text))
    except ValueError:
        report.error(path, f"'{text}' is not an agent id (a UUID)")
        return None


def _check_agents_exist(report: DocumentReport, paths: dict[str, str]) -> None:
    """Each id of ``paths`` that names no live agent is reported at its path (a group's id: nested)."""
    live = {
        str(key)
        for key in Agent.objects.filter(pk__in=paths, deleted_at__isnull=True).values_list("pk", flat=True)
    }
    groups = {str(key) for key in Group.objects.filter(pk__in=set(paths) - live).values_list("pk", flat=True)}
    for agent_id, path in paths.items():
        if agent_id in groups:
            report.error(path, NESTED_GROUPS)
        elif agent_id not in live:
            report.error(path, f"no agent '{agent_id}' (unknown or deleted)")


# --- phases and tasks ----------------------------------------------------------------------------------


def _check_phases(report: DocumentReport, value: object, members: set[str]) -> None:
    names: dict[str, str] = {}
    for phase, path in expect_objects(report, value, "phases", non_empty=True):
        _refuse_unknown_keys(report, phase, path, PHASE_KEYS, "phase")
        name = expect_string(
            report, phase.get("name"), child(path, "name"), non_empty=True, max_length=NAME_MAX
        )
        expect_unique(report, name, child(path, "name"), names, "phase name")
        phase_type = expect_choice(report, phase.get("type"), child(path, "type"), PHASE_TYPES)
        expect_string(report, phase.get("description"), child(path, "description"), required=False)
        _expect_int(report, phase.get("repeats"), child(path, "repeats"), REPEATS_RANGE)
        expect_boolean(report, phase.get("requiresApproval"), child(path, "requiresApproval"))
        if phase_type == EXECUTE:
            _check_execute_phase(report, phase, path, members)
        elif phase_type is not None:
            for key in ("tasks", "planner"):
                if key in phase:
                    report.error(child(path, key), f"only an EXECUTE phase has {key}, not {phase_type}")


def _check_execute_phase(report: DocumentReport, phase: dict, path: str, members: set[str]) -> None:
    tasks, planner = phase.get("tasks"), phase.get("planner")
    if tasks is None and planner is None:
        report.error(path, "an EXECUTE phase needs tasks, a planner (a member's agentId), or both")
    if planner is not None:
        _expect_member(report, planner, child(path, "planner"), members)
    if tasks is not None:
        check_tasks(report, tasks, child(path, "tasks"), members)


def _expect_member(report: DocumentReport, value: object, path: str, members: Collection[str]) -> None:
    text = expect_string(report, value, path, non_empty=True)
    if text is None:
        return
    try:
        canonical = str(uuid.UUID(text))
    except ValueError:
        canonical = text
    if canonical not in members:
        report.error(path, f"'{text}' is not a member of the group (a member's agentId)")


def check_tasks(report: DocumentReport, value: object, path: str, members: Collection[str]) -> None:
    """The task rules, for tasks declared in a phase and for a planner's plan alike: unique ids, an
    assignee that is a member, dependencies on tasks of the same list, and no dependency cycle."""
    entries = list(expect_objects(report, value, path, non_empty=True))
    ids: dict[str, str] = {}
    for task, task_path in entries:
        _refuse_unknown_keys(report, task, task_path, TASK_KEYS, "task")
        task_id = expect_string(
            report, task.get("id"), child(task_path, "id"), non_empty=True, pattern=IDENTIFIER
        )
        expect_unique(report, task_id, child(task_path, "id"), ids, "task id")
        expect_string(report, task.get("description"), child(task_path, "description"), non_empty=True)
        _expect_member(report, task.get("assignee"), child(task_path, "assignee"), members)
    graph: dict[str, list[str]] = {}
    for task, task_path in entries:
        depends = expect_list(report, task.get("dependsOn"), child(task_path, "dependsOn"), required=False)
        task_id = task.get("id") if isinstance(task.get("id"), str) else None
        for index, dependency in enumerate(depends or []):
            where = child(child(task_path, "dependsOn"), index)
            if not isinstance(dependency, str):
                report.error(where, f"must be a task id, got {json_type(dependency)}")
            elif dependency == task_id:
                report.error(where, f"task '{dependency}' cannot depend on itself")
            elif dependency not in ids:
                report.error(where, f"'{dependency}' is not a task of this list")
            elif task_id is not None:
                graph.setdefault(task_id, []).append(dependency)
    cycle = _dependency_cycle(graph)
    if cycle:
        report.error(path, f"the tasks depend on each other in a cycle: {' -> '.join(cycle)}")


def _dependency_cycle(graph: dict[str, list[str]]) -> list[str]:
    """One cycle of ``graph`` (task -> the tasks it depends on) as a closed path, or [] if there is none."""
    done: set[str] = set()
    for start in graph:
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, Iterable[str]]] = [(start, iter(graph.get(start, ())))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, pending = stack[-1]
            following = next(iter(pending), None)
            if following is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
            elif following in on_path:
                return path[path.index(following) :] + [following]
            elif following not in done:
                stack.append((following, iter(graph.get(following, ()))))
                path.append(following)
                on_path.add(following)
    return []


# --- hitlConfig ----------------------------------------------------------------------------------------


def _check_hitl_config(report: DocumentReport, value: object) -> None:
    """Only the duration check of an agent's hitlConfig applies, with a group's
    own fields: the approval granularity, what a rejected task does, and whether the discussion's owner
    may decide its gates (``allowSelfApproval``, as on an agent)."""
    config = expect_object(report, value, "hitlConfig", required=False)
    if config is None:
        return
    _refuse_unknown_keys(report, config, "hitlConfig", HITL_CONFIG_KEYS, "group hitlConfig")
    expect_choice(report, config.get("granularity"), "hitlConfig.granularity", GRANULARITIES, required=False)
    expect_choice(
        report,
        config.get("onTaskRejection"),
        "hitlConfig.onTaskRejection",
        TASK_REJECTION_POLICIES,
        required=False,
    )
    report.errors.extend(timeout_errors(config, "hitlConfig"))
    report.errors.extend(allow_self_approval_errors(config.get("allowSelfApproval"), "hitlConfig"))
    report.errors.extend(routing_errors(config, "hitlConfig"))
    report.warnings.extend(routing_warnings(config, "hitlConfig"))


# --- a planner's task plan ------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(?P<body>.*)\n\s*```\s*$", re.DOTALL)


class BadTaskPlan(ValueError):
    """A planner's output that is not a valid task list; ``str()`` is the discussion's error."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        listed = "; ".join(f"{e.field}: {e.message}" if e.field else e.message for e in errors)
        super().__init__(f"the planner's task plan is invalid: {listed}")


def parse_task_plan(text: str, *, members: Iterable[str]) -> list[dict[str, Any]]:
    """The tasks of a planner's output: a JSON array of tasks, or an object ``{"tasks": [...]}``, optionally
    in a ```json fence. Checked with the rules of tasks declared in a phase (``check_tasks``); anything
    else raises BadTaskPlan naming every problem (``tasks[1].assignee: ...``)."""
    fenced = _FENCE.match(text)
    try:
        plan = json.loads(fenced.group("body") if fenced else text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise BadTaskPlan([FieldError("", f"not JSON ({exc})")]) from None
    if isinstance(plan, dict) and set(plan) == {"tasks"}:
        plan = plan["tasks"]
    if not isinstance(plan, list):
        raise BadTaskPlan(
            [FieldError("", f'must be an array of tasks or {{"tasks": [...]}}, got {json_type(plan)}')]
        )
    report = DocumentReport()
    for error in body_errors(plan, field="tasks"):
        report.error(error["field"], error["message"])
    if not report.errors:
        check_tasks(report, plan, "tasks", {str(member) for member in members})
    if report.errors:
        raise BadTaskPlan(report.errors)
    return plan
