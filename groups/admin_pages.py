"""A group pause's part of the admin decision page (approvals.pause_kinds.DecisionPage), registered at
startup for PHASE and TASK pauses.

The core page shows the reason, deadline and policy and takes the decision; this adds what only the
group surface knows: the group, the phase, the discussion's transcript and, for a TASK pause, every
task awaiting approval with its result and a verdict of its own. The verdicts become the REST body
(``{"decision", "taskApprovals"}``) and are parsed by its parser; the TASK validator then checks them
inside the decision service (unknown task, not awaiting, bad value), so the admin refuses exactly what
``POST .../approve`` refuses, before anything is consumed. What a member said (transcript, results,
the question) is shown only to a reviewer who may read the discussion's turns.
"""

from __future__ import annotations

from typing import Any

from approvals.decision_input import DecisionInput
from approvals.models import Pause, PauseKind
from approvals.pause_kinds import PageItem, PageSection, PageTable, register_decision_page
from common.errors import ApplicationError
from groups import task_list
from groups.discussion_continuation import FAIL, RETRY
from groups.discussion_decisions import parse_group_decision
from groups.discussions import member_id
from groups.models import Group, GroupConversation
from groups.selectors import group_version

TRANSCRIPT_SHOWN = 100
HIDDEN = "hidden: approvers read a discussion only while it waits for a decision"
# What a rejected task becomes, by the group's hitlConfig.onTaskRejection (read when the decision runs).
ON_REJECTION = {
    RETRY: "goes back to its assignee with your note and runs again",
    FAIL: "fails, and so do the tasks that depend on it",
}
ITEMS_HELP = (
    "Approve completes a task; a rejected task {rejection}. A task left at “Same as the decision” takes "
    "the verdict of the button you press. The reject button fails the whole discussion, whatever the "
    "task verdicts say."
)


def _current_document(group_id: Any) -> dict[str, Any] | None:
    """The group's latest document: the one the resumed discussion runs on (None: the group is gone)."""
    try:
        return group_version(group_id=group_id).document
    except ApplicationError:
        return None


def _member_names(document: dict[str, Any] | None) -> dict[str, str]:
    names = {}
    for member in (document or {}).get("members", []):
        agent_id = member_id(member["agentId"])
        name = member.get("displayName") or member.get("role")
        names[agent_id] = f"{name} ({agent_id})" if name else agent_id
    return names


def _task_item(
    task_id: str, task: dict[str, Any] | None, *, names: dict[str, str], may_read: bool
) -> PageItem:
    field = f"taskApprovals.{task_id}"
    if task is None:
        return PageItem(
            task_id, f"Task {task_id}", (("Status", "no such task in the discussion"),), True, field
        )
    result = (task.get("result") or "-") if may_read else HIDDEN
    facts = [
        ("Task id", task_id),
        ("Description", task["description"]),
        ("Assignee", names.get(task["assignee"], task["assignee"])),
        ("Status", task["status"]),
        ("Result", result),
    ]
    if task.get("dependsOn"):
        facts.append(("Depends on", ", ".join(task["dependsOn"])))
    return PageItem(task_id, f"Task {task_id}", tuple(facts), True, field)


def _transcript(discussion: GroupConversation, names: dict[str, str]) -> PageTable:
    entries = discussion.transcript[-TRANSCRIPT_SHOWN:]
    first = len(discussion.transcript) - len(entries)
    shown = f"the last {len(entries)} of {len(discussion.transcript)} entries" if first else "every entry"
    rows = tuple(
        (
            str(first + number + 1),
            str(entry.get("phase") or ""),
            entry.get("role")
            or names.get(entry.get("member") or "", entry.get("member") or "")
            or "the discussion",
            str(entry.get("status") or ""),
            str(entry.get("content") or entry.get("note") or ""),
        )
        for number, entry in enumerate(entries)
    )
    return PageTable(f"Discussion transcript ({shown})", ("#", "Phase", "Speaker", "Status", "Said"), rows)


def _facts(pause: Pause, discussion: GroupConversation | None, *, may_read: bool) -> list[tuple[str, str]]:
    details = pause.details or {}
    group = Group.objects.filter(pk=pause.group_id).first() if pause.group_id else None
    state = f"{discussion.state}, group version {discussion.group_version}" if discussion else "gone"
    facts = [
        (
            "Group",
            f"{group.name} ({group.pk})" if group and not group.deleted_at else f"{pause.group_id} (deleted)",
        ),
        ("Discussion", f"{pause.subject_id} ({state})"),
    ]
    if discussion is not None and may_read:
        facts.append(("Question", discussion.question))
    phase = (
        f"{details.get('phaseName')} ({details.get('phaseType')}), index {details.get('phaseIndex')}; "
        f"approved per {details.get('granularity') or pause.kind}"
    )
    return [*facts, ("Phase", phase)]


def _produced(pause: Pause, discussion: GroupConversation, names: dict[str, str]) -> PageTable:
    """What the members said in the paused phase: what the reviewer signs off, first (the transcript of
    the whole discussion comes after the decision)."""
    phase_name = (pause.details or {}).get("phaseName")
    rows = tuple(
        (
            entry.get("role") or names.get(entry["member"], entry["member"]),
            str(entry.get("status") or ""),
            str(entry.get("content") or entry.get("note") or ""),
        )
        for entry in discussion.transcript
        if entry.get("phase") == phase_name and entry.get("member") is not None
    )
    return PageTable(f"What phase {phase_name} produced", ("Speaker", "Status", "Said"), rows)


def _task_items(
    pause: Pause, discussion: GroupConversation | None, *, names: dict[str, str], may_read: bool
) -> tuple[PageItem, ...]:
    """The tasks the pause was opened for (``awaitingTaskIds``), as they are now: one that stopped
    awaiting keeps its verdict field, and the TASK validator says why it cannot be decided."""
    details = pause.details or {}
    phase_tasks = task_list.of_phase(discussion.tasks if discussion else [], details.get("phaseName"))
    tasks = {task["id"]: task for task in phase_tasks}
    return tuple(
        _task_item(task_id, tasks.get(task_id), names=names, may_read=may_read)
        for task_id in details.get("awaitingTaskIds") or []
    )


def _approve_label(pause: Pause, document: dict[str, Any] | None, *, tasks: bool) -> str:
    """What Approve does: go on with the task verdicts, go on to the next phase, or, at the last phase,
    complete the discussion."""
    if tasks:
        return "Approve: continue with these task verdicts"
    phases = (document or {}).get("phases") or []
    index = (pause.details or {}).get("phaseIndex")
    if phases and isinstance(index, int) and index == len(phases) - 1:
        return "Approve: complete the discussion (this is its last phase)"
    return "Approve: continue the discussion"


def _quoted(name: Any) -> str:
    return f"“{name}”"


class GroupDecisionPage:
    def headline(self, pause: Pause) -> str:
        """E.g. "“Product council” finished phase “Opinions” (OPINION): 3 contributions to review"; a pause
        opened before its details named the group and what the phase produced says less."""
        details = pause.details or {}
        group = _quoted(details["groupName"]) if details.get("groupName") else "A group discussion"
        phase = f"phase {_quoted(details.get('phaseName') or '?')}"
        if details.get("phaseType"):
            phase += f" ({details['phaseType']})"
        produced = details.get("produced")
        if pause.kind == PauseKind.TASK:
            return f"{group}, {phase}: {produced or 'tasks'} to review"
        return f"{group} finished {phase}" + (f": {produced} to review" if produced else "")

    def inbox_where(self, pause: Pause) -> str:
        return str((pause.details or {}).get("groupName") or "")

    def inbox_label(self, pause: Pause) -> str:
        details = pause.details or {}
        label = f"phase {details.get('phaseIndex', '?')}: {details.get('phaseName') or '?'}"
        if details.get("phaseType"):
            label += f" ({details['phaseType']})"
        if pause.kind == PauseKind.TASK:
            label += f", {len(details.get('awaitingTaskIds') or [])} task(s) awaiting"
        return label

    def section(self, pause: Pause, *, may_read: bool) -> PageSection:
        discussion = GroupConversation.objects.filter(pk=pause.subject_id).first()
        document = _current_document(pause.group_id) if pause.group_id else None
        names = _member_names(document)
        on_rejection = ((document or {}).get("hitlConfig") or {}).get("onTaskRejection") or FAIL
        facts = _facts(pause, discussion, may_read=may_read)
        items: tuple[PageItem, ...] = ()
        if pause.kind == PauseKind.TASK:
            facts.append(("On a rejected task", f"{on_rejection}: it {ON_REJECTION.get(on_rejection, '?')}"))
            items = _task_items(pause, discussion, names=names, may_read=may_read)
        return PageSection(
            heading="Group discussion",
            facts=tuple(facts),
            items_heading="Tasks awaiting approval" if items else "",
            items=items,
            items_help=ITEMS_HELP.format(rejection=ON_REJECTION.get(on_rejection, "?")) if items else "",
            transcript=_transcript(discussion, names) if may_read and discussion is not None else None,
            tables=(_produced(pause, discussion, names),)
            if may_read and discussion is not None and pause.kind == PauseKind.PHASE
            else (),
            note_help="a rejected task gets it as the reviewer's feedback; a rejected discussion records it "
            "in its transcript"
            if items
            else "a rejected discussion records it in its transcript",
            approve_label=_approve_label(pause, document, tasks=bool(items)),
            reject_label="Reject: fail the discussion",
            cancel_hint=f"cancel the discussion (POST /groups/{pause.group_id}/conversations/{pause.subject_id}/cancel)",
        )

    def with_item_verdicts(self, decision: DecisionInput, verdicts: dict[str, str]) -> DecisionInput:
        """The REST approve body of this decision, parsed by REST's own parser."""
        body = {"decision": {"verdict": decision.verdict, "note": decision.note}, "taskApprovals": verdicts}
        return parse_group_decision(body)

    def outcome(self, pause: Pause) -> str:
        discussion = GroupConversation.objects.filter(pk=pause.subject_id).first()
        if discussion is None:
            return "The discussion is gone."
        text = f"The discussion is now {discussion.state} (phase {discussion.phase_index})"
        phase_name = (pause.details or {}).get("phaseName")
        if pause.kind == PauseKind.TASK and (tasks := task_list.of_phase(discussion.tasks, phase_name)):
            text += f"; tasks of {phase_name}: " + ", ".join(f"{t['id']} {t['status']}" for t in tasks)
        last = discussion.transcript[-1] if discussion.transcript else {}
        if last.get("member", "") is None and last.get("note"):  # the discussion's own last word: why
            text += f". {last['note']}"
        return text + "."


def register() -> None:
    page = GroupDecisionPage()
    register_decision_page(PauseKind.PHASE, page)
    register_decision_page(PauseKind.TASK, page)
