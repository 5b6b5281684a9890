"""Running a group discussion: every member takes its turns through the 1:1 engine (docs/groups.md).

The discussion runs whole in the request that starts it. Each member talks through a conversation of
its own, owned by the discussion's owner, on the member agent's newest production version. OPINION,
CHALLENGE and SYNTHESIS phases give every member, in order, one turn per round (``repeats``); an
EXECUTE phase runs its tasks in waves, each task once the tasks it depends on are COMPLETED, by its
assignee. Every member turn counts against ``protocol.maxTurns``.

Fail closed: a group with an approval gate (``requiresApproval``) is refused until the gates exist
(issue 13, part 3), so a gate is never skipped; and a member's own PAUSE_CONVERSATION is never left
open nor approved: its pause is cancelled as ``system:group`` and its turn is SKIPPED.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from approvals import metrics
from approvals.actors import system_actor
from approvals.audit import append_audit_entry
from approvals.errors import ApplicationError, NotFound
from approvals.models import SubjectType
from conversations import turns
from conversations.agents import newest_deployed_version
from conversations.cancels import cancel_conversation
from conversations.errors import NotDeployed
from conversations.models import ConversationState
from conversations.selectors import reread_conversation
from conversations.snapshots import snapshot
from groups.errors import NotSupportedYet
from groups.group_document import DEFAULT_MAX_TURNS, EXECUTE, BadTaskPlan, parse_task_plan
from groups.models import DiscussionState, GroupConversation
from groups.prompts import member_prompt, planner_prompt, task_prompt
from groups.selectors import group_version

logger = logging.getLogger(__name__)

ENVIRONMENT = "production"
GROUP_ACTOR = system_actor("group")
OK, SKIPPED, ERROR = "OK", "SKIPPED", "ERROR"
PENDING, IN_PROGRESS, COMPLETED, FAILED = "PENDING", "IN_PROGRESS", "COMPLETED", "FAILED"
MEMBER_PAUSE_NOTE = (
    "member agent requested human approval (PAUSE_CONVERSATION) — not supported inside group discussions; "
    "configure group-level HITL via requiresApproval instead"
)
GATES_NOT_BUILT = "approval gates of group discussions are not built yet; the discussion would skip them"


class _Stop(Exception):
    """The discussion cannot go on; ``str()`` is the transcript's ERROR note."""


@dataclass(frozen=True)
class Answer:
    status: str
    content: str = ""
    note: str = ""


@dataclass
class _Run:
    discussion: GroupConversation
    document: dict[str, Any]
    roles: dict[str, str | None] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)

    @property
    def max_turns(self) -> int:
        return int((self.document.get("protocol") or {}).get("maxTurns") or DEFAULT_MAX_TURNS)

    def save(self) -> None:
        self.discussion.save(
            update_fields=[
                "state",
                "phase_index",
                "turn_count",
                "transcript",
                "tasks",
                "member_conversations",
                "updated_at",
            ]
        )

    def check_budget(self) -> None:
        if self.discussion.turn_count >= self.max_turns:
            raise _Stop(f"turn budget exhausted (protocol.maxTurns = {self.max_turns})")

    def turn(self, agent_id: str, prompt: str) -> Answer:
        """One member turn, counted against the budget (refused once it is spent) and saved with its count."""
        self.check_budget()
        self.discussion.turn_count += 1
        answer = _member_turn(self.discussion, agent_id, prompt)
        self.save()
        return answer

    def record(self, phase: dict[str, Any], agent_id: str | None, answer: Answer, **extra: Any) -> None:
        entry: dict[str, Any] = {
            "phase": phase["name"],
            "phaseType": phase["type"],
            "member": agent_id,
            "role": self.roles.get(agent_id or ""),
            "content": answer.content,
            "status": answer.status,
        }
        if answer.note:
            entry["note"] = answer.note
        self.discussion.transcript.append(entry | extra)
        self.save()


def member_id(agent_id: str) -> str:
    """The canonical form of a member's agentId (the document may spell a UUID in capitals)."""
    return str(uuid.UUID(str(agent_id)))


def require_no_gates(document: dict[str, Any]) -> None:
    """Fail closed: a phase that requires approval is refused, never run without its gate."""
    gated = [phase["name"] for phase in document["phases"] if phase.get("requiresApproval")]
    if gated:
        raise NotSupportedYet(f"{GATES_NOT_BUILT} (requiresApproval on: {', '.join(gated)})", phases=gated)


def _require_deployed_members(document: dict[str, Any]) -> None:
    for member in document["members"]:
        agent_id = member["agentId"]
        try:
            newest_deployed_version(agent_id=agent_id, environment=ENVIRONMENT)
        except (NotDeployed, NotFound):
            raise NotDeployed(
                f"Member {agent_id} ({member.get('displayName') or member.get('role') or 'no name'}) is not "
                f"deployed in {ENVIRONMENT}; the discussion was not started",
                agentId=agent_id,
            ) from None


def start_discussion(*, user: Any, group_id: Any, question: str) -> GroupConversation:
    """Start a discussion on the group's latest version and run it to its end (COMPLETED or FAILED).

    Refused with nothing created when a phase requires approval (409 NOT_SUPPORTED_YET) or a member is
    not deployed in production (409 NOT_DEPLOYED, naming it)."""
    version = group_version(group_id=group_id)
    document = version.document
    require_no_gates(document)
    _require_deployed_members(document)
    with transaction.atomic():
        discussion = GroupConversation.objects.create(
            group_id=version.group_id,
            group_version=version.version,
            owner=user,
            question=question,
            state=DiscussionState.IN_PROGRESS,
        )
        append_audit_entry(
            subject_type=SubjectType.DISCUSSION,
            subject_id=discussion.id,
            verb="hitl.discussion.started",
            actor=user.get_username(),
            detail={"groupId": str(version.group_id), "groupVersion": version.version},
        )
    run = _Run(discussion, document)
    for member in document["members"]:
        agent_id = member_id(member["agentId"])
        run.roles[agent_id] = member.get("role")
        run.names[agent_id] = member.get("displayName") or member.get("role") or agent_id
    try:
        _run_phases(run)
        discussion.state = DiscussionState.COMPLETED
    except _Stop as stop:
        phase = document["phases"][discussion.phase_index]
        run.record(phase, None, Answer(ERROR, note=str(stop)))
        discussion.state = DiscussionState.FAILED
    except Exception:
        logger.exception("discussion %s failed", discussion.id)
        _finish(run, DiscussionState.FAILED)
        raise
    _finish(run, discussion.state)
    return discussion


def _finish(run: _Run, state: str) -> None:
    discussion = run.discussion
    with transaction.atomic():
        discussion.state = state
        run.save()
        append_audit_entry(
            subject_type=SubjectType.DISCUSSION,
            subject_id=discussion.id,
            verb="hitl.discussion.finished",
            actor=GROUP_ACTOR.name,
            detail={"state": state, "turnCount": discussion.turn_count},
        )


def _run_phases(run: _Run) -> None:
    for index, phase in enumerate(run.document["phases"]):
        run.discussion.phase_index = index
        run.save()
        if phase["type"] == EXECUTE:
            _run_execute_phase(run, phase)
        else:
            _run_rounds(run, phase)


def _run_rounds(run: _Run, phase: dict[str, Any]) -> None:
    for round_number in range(1, int(phase.get("repeats") or 1) + 1):
        for member in run.document["members"]:
            agent_id = member_id(member["agentId"])
            prompt = member_prompt(
                question=run.discussion.question,
                phase=phase,
                role=member.get("role"),
                transcript=run.discussion.transcript,
                names=run.names,
                round_number=round_number,
            )
            run.record(phase, agent_id, run.turn(agent_id, prompt), round=round_number)


# --- EXECUTE ------------------------------------------------------------------------------------------


def _planned_tasks(run: _Run, phase: dict[str, Any]) -> list[dict[str, Any]]:
    """The phase's tasks: its planner's plan when it has a planner, else the tasks it declares."""
    if phase.get("planner") is None:
        return phase["tasks"]
    planner = member_id(phase["planner"])
    prompt = planner_prompt(
        question=run.discussion.question,
        phase=phase,
        role=run.roles.get(planner),
        transcript=run.discussion.transcript,
        names=run.names,
    )
    answer = run.turn(planner, prompt)
    run.record(phase, planner, answer)
    if answer.status != OK:
        raise _Stop(f"the planner's turn was {answer.status}: there is no task plan")
    try:
        return parse_task_plan(answer.content, members=run.names)
    except BadTaskPlan as bad:
        raise _Stop(str(bad)) from None


def _run_execute_phase(run: _Run, phase: dict[str, Any]) -> None:
    tasks = [
        {
            "phase": phase["name"],
            "id": task["id"],
            "description": task["description"],
            "assignee": member_id(task["assignee"]),
            "dependsOn": list(task.get("dependsOn") or []),
            "status": PENDING,
            "result": None,
        }
        for task in _planned_tasks(run, phase)
    ]
    run.discussion.tasks.extend(tasks)
    run.save()
    by_id = {task["id"]: task for task in tasks}
    while any(task["status"] == PENDING for task in tasks):
        _fail_tasks_of_failed_dependencies(tasks, by_id)
        ready = [
            task
            for task in tasks
            if task["status"] == PENDING and all(by_id[d]["status"] == COMPLETED for d in task["dependsOn"])
        ]
        for task in ready:
            _run_task(run, phase, task, [by_id[d] for d in task["dependsOn"]])


def _fail_tasks_of_failed_dependencies(tasks: list[dict[str, Any]], by_id: dict[str, dict[str, Any]]) -> None:
    """A task that depends on a FAILED task fails without running (and so do the tasks depending on it)."""
    changed = True
    while changed:
        changed = False
        for task in tasks:
            failed = [d for d in task["dependsOn"] if by_id[d]["status"] == FAILED]
            if task["status"] == PENDING and failed:
                task["status"], task["note"] = FAILED, f"not run: it depends on failed task {failed[0]}"
                changed = True


def _run_task(run: _Run, phase: dict[str, Any], task: dict[str, Any], dependencies: list[dict]) -> None:
    assignee = task["assignee"]
    prompt = task_prompt(
        question=run.discussion.question,
        phase=phase,
        role=run.roles.get(assignee),
        task=task,
        dependencies=dependencies,
    )
    run.check_budget()  # a task the budget does not reach stays PENDING
    task["status"] = IN_PROGRESS
    answer = run.turn(assignee, prompt)
    if answer.status == OK:
        task["status"], task["result"] = COMPLETED, answer.content
        run.save()
    else:
        task["status"], task["note"] = FAILED, answer.note
        run.record(phase, assignee, answer, task=task["id"])


# --- one member turn ----------------------------------------------------------------------------------


def _talk(discussion: GroupConversation, agent_id: str, prompt: str) -> turns.TurnResult:
    """The member's turn in its own conversation, started (as the discussion's owner) on its first turn."""
    owner = discussion.owner
    known = discussion.member_conversations.get(agent_id)
    if known is None:
        started = turns.start_conversation(user=owner, agent_id=agent_id, environment=ENVIRONMENT)
        discussion.member_conversations[agent_id] = str(started.conversation.id)
        if started.conversation.state == ConversationState.AWAITING_HUMAN:
            return started
        conversation = started.conversation
    else:
        conversation = reread_conversation(conversation_id=known)
    return turns.say(conversation=conversation, user=owner, user_input=prompt, context={})


def _member_turn(discussion: GroupConversation, agent_id: str, prompt: str) -> Answer:
    """OK with the member's output joined; SKIPPED when the member paused (its pause is cancelled as
    system:group through the audited cancel path); ERROR when the turn raised or ended in ERROR."""
    try:
        result = _talk(discussion, agent_id, prompt)
    except ApplicationError as exc:
        return Answer(ERROR, note=exc.detail)
    conversation = result.conversation
    if conversation.state == ConversationState.AWAITING_HUMAN:
        cancel_conversation(conversation=conversation, actor=GROUP_ACTOR)
        metrics.count_member_pause_skipped()
        return Answer(SKIPPED, note=MEMBER_PAUSE_NOTE)
    if conversation.state == ConversationState.ERROR:
        return Answer(ERROR, note=f"the member's turn failed (conversation {conversation.id} is in ERROR)")
    output = snapshot(conversation, steps=result.steps)["output"]
    return Answer(OK, content="\n".join(str(text) for text in output))
