"""Running a group discussion: every member takes its turns through the 1:1 engine (docs/groups.md).

A discussion runs in the process that starts or resumes it, under a lease its heartbeat renews
(``GroupConversation.turn_alive_until``), so a dead process's discussion is found by recovery. OPINION,
CHALLENGE and SYNTHESIS phases give every member, in order, one turn per round (``repeats``); an
EXECUTE phase runs its tasks in waves, each task once the tasks it depends on are COMPLETED, by its
assignee. Every member turn counts against ``protocol.maxTurns``. After a phase that requires approval
the discussion pauses at its gate (groups.gates) and ends this run; the decision's continuation
(groups.discussion_continuation) runs it on from there.

Every step is told to the run's ``EventSink`` (groups.events), which the SSE streams forward; a run
always ends with one closing event.

A member turn is one transaction when the member's agent runs its turns in one (every task local,
conversations.local_turns): the member's seat (its conversation and version, one read), its turn, and the
discussion's write (the transcript entry or task result, the count, and what waited for the next write: a
phase's start, its task list) commit together or not at all, and its events are told after the commit.
That write is the cancel check too: it applies only while no cancel is recorded, and a cancel recorded
before it rolls the whole turn back. A slow member's turn runs outside any transaction, as its 1:1 turn
does, after a cancel check.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals.audit import append_audit_entry
from approvals.leases import kept_alive, lease_expiry
from approvals.models import SubjectType
from approvals.pause_caps import require_room_for_a_pause
from common.errors import NotFound
from conversations.agents import newest_deployed_version
from conversations.errors import NotDeployed
from groups import events as ev
from groups import gates, task_list
from groups.group_document import DEFAULT_MAX_TURNS, EXECUTE, BadTaskPlan, parse_task_plan
from groups.member_turns import (
    ENVIRONMENT,
    ERROR,
    GROUP_ACTOR,
    OK,
    SKIPPED,
    Answer,
    Seat,
    member_turn,
    seat_of,
)
from groups.models import DiscussionState, GroupConversation
from groups.prompts import member_prompt, planner_prompt, task_prompt
from groups.selectors import group_version

logger = logging.getLogger(__name__)

__all__ = ["start_discussion", "run_from", "Run", "OK", "SKIPPED", "ERROR", "GROUP_ACTOR"]


class _Stop(Exception):
    """The discussion cannot go on; ``str()`` is the transcript's ERROR note."""


class _Cancelled(Exception):
    """A cancel was requested while the discussion ran: it stops before its next member turn."""


# What a member's answer changes in the discussion: a transcript entry (returned), or a task's result (None).
Outcome = Callable[[Answer], dict[str, Any] | None]

# What a run writes of its discussion (never the cancel request, which another process writes, nor the
# lease, which the heartbeat renews).
RUN_FIELDS = (
    "state",
    "phase_index",
    "turn_count",
    "transcript",
    "tasks",
    "member_conversations",
    "budget_base",
    "last_pause_fingerprint",
    "group_version",
    "updated_at",
)


@dataclass
class Run:
    """A discussion being run, on a version of its group's document."""

    discussion: GroupConversation
    document: dict[str, Any]
    events: ev.EventSink = ev.no_events
    roles: dict[str, str | None] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    unsaved: bool = False  # a change waits for the run's next write (``save_with_next_write``)

    def __post_init__(self) -> None:
        for member in self.document["members"]:
            agent_id = member_id(member["agentId"])
            self.roles[agent_id] = member.get("role")
            self.names[agent_id] = member.get("displayName") or member.get("role") or agent_id

    @property
    def max_turns(self) -> int:
        return int((self.document.get("protocol") or {}).get("maxTurns") or DEFAULT_MAX_TURNS)

    def emit(self, name: str, **data: Any) -> None:
        payload = {"discussionId": str(self.discussion.id), **data}
        for sink in (self.events, *ev.observers()):
            try:
                sink(name, payload)
            except Exception:  # a watcher that went away never stops the discussion
                logger.exception("event %s of discussion %s could not be sent", name, self.discussion.id)

    def save(self, *also: str) -> None:
        """What the run changed (never the cancel request, which another process writes), and ``also``."""
        self.discussion.save(update_fields=[*RUN_FIELDS, *also])
        self.unsaved = False

    def save_with_next_write(self) -> None:
        """A change that no one needs before the run's next write (a member turn's, a gate's, the end's)."""
        self.unsaved = True

    def budget_spent(self) -> bool:
        return self.discussion.turn_count - self.discussion.budget_base >= self.max_turns

    def check_budget(self) -> None:
        if self.budget_spent():
            raise _Stop(f"turn budget exhausted (protocol.maxTurns = {self.max_turns})")

    def check_cancel(self) -> None:
        requested = (
            GroupConversation.objects.filter(pk=self.discussion.pk)
            .values_list("cancel_requested_at", "cancel_requested_by")
            .first()
        )
        if requested is None or requested[0] is not None:
            raise _Cancelled(requested[1] if requested else "")

    def turn(self, agent_id: str, prompt: str, outcome: Outcome) -> Answer:
        """One member turn, counted against the budget (refused once it is spent), with ``outcome``: what its
        answer changes in the discussion (a transcript entry, which it returns, or a task's result). One
        write of the discussion per turn, in the turn's own transaction when the member's agent is local
        (see the module); its events are told once that is committed."""
        with self._forgotten_if_rolled_back(), transaction.atomic():
            if self.budget_spent():
                self.check_cancel()  # a cancel requested meanwhile wins over the spent budget
                self.check_budget()
            seat = seat_of(conversations=self.discussion.member_conversations, agent_id=agent_id)
            if seat.in_one_transaction:
                answer, entry = self._take(seat, prompt, outcome)
                self.save_unless_cancelled()
            else:
                self.check_cancel()
        if not seat.in_one_transaction:  # a slow turn: what waited is written first, so it shows meanwhile
            if self.unsaved:
                self.save()
            answer, entry = self._take(seat, prompt, outcome)
            self.save()
        if answer.skipped_pause:
            self.emit(ev.MEMBER_PAUSE_SKIPPED, member=agent_id, note=answer.note)
        if entry is not None:
            self.emit(
                ev.MEMBER_ANSWERED,
                phase=entry["phase"],
                member=agent_id,
                role=entry["role"],
                status=answer.status,
            )
        return answer

    def _take(self, seat: Seat, prompt: str, outcome: Outcome) -> tuple[Answer, dict[str, Any] | None]:
        """The member's turn, counted, and its outcome applied (not yet written)."""
        self.discussion.turn_count += 1
        answer = member_turn(
            owner=self.discussion.owner,
            conversations=self.discussion.member_conversations,
            seat=seat,
            prompt=prompt,
        )
        return answer, outcome(answer)

    def save_unless_cancelled(self, *also: str) -> None:
        """``save`` as a compare-and-set: only while no cancel is recorded, so a local turn's write is also
        its cancel check. A cancel recorded before it raises ``_Cancelled`` and the turn's transaction rolls
        back: the discussion stops with nothing of that turn, as if it stopped before it."""
        discussion = self.discussion
        discussion.updated_at = timezone.now()
        values = {name: getattr(discussion, name) for name in (*RUN_FIELDS, *also)}
        if not GroupConversation.objects.filter(pk=discussion.pk, cancel_requested_at__isnull=True).update(
            **values
        ):
            self.check_cancel()
            raise _Cancelled("")
        self.unsaved = False

    @contextmanager
    def _forgotten_if_rolled_back(self) -> Iterator[None]:
        """A turn whose transaction rolls back leaves nothing behind in memory either (the run's end writes
        what is in memory): no entry, result, member conversation or count."""
        discussion = self.discussion
        turns, entries = discussion.turn_count, len(discussion.transcript)
        conversations = dict(discussion.member_conversations)
        tasks = [(task, dict(task)) for task in discussion.tasks]
        try:
            yield
        except BaseException:
            discussion.turn_count = turns
            del discussion.transcript[entries:]
            discussion.member_conversations = conversations
            for task, before in tasks:
                task.clear()
                task.update(before)
            raise

    def entry(
        self, phase: dict[str, Any], agent_id: str | None, answer: Answer, **extra: Any
    ) -> dict[str, Any]:
        """Add ``answer``'s transcript entry (written with the run's next write); returns it."""
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
        if answer.tool_rejected:
            entry["toolCallRejected"] = True
        entry |= extra
        self.discussion.transcript.append(entry)
        return entry

    def task_changed(self, task: dict[str, Any]) -> None:
        self.emit(ev.TASK_STATUS, taskId=task["id"], phase=task["phase"], status=task["status"])


def member_id(agent_id: str) -> str:
    """The canonical form of a member's agentId (the document may spell a UUID in capitals)."""
    return str(uuid.UUID(str(agent_id)))


def require_deployed_members(document: dict[str, Any]) -> None:
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


def renew_lease(discussion_id: Any, until: datetime) -> None:
    GroupConversation.objects.filter(pk=discussion_id, state=DiscussionState.IN_PROGRESS).update(
        turn_alive_until=until
    )


def start_discussion(
    *, user: Any, group_id: Any, question: str, events: ev.EventSink = ev.no_events
) -> GroupConversation:
    """Start a discussion on the group's latest version and run it until it ends (COMPLETED, FAILED,
    CANCELLED) or pauses at a gate (AWAITING_APPROVAL).

    Refused with nothing created when a member is not deployed in production (409 NOT_DEPLOYED, naming it),
    or when the user is at the cap of pending pauses (409 LIMIT_REACHED, approvals.pause_caps)."""
    with transaction.atomic():  # the checks read in the transaction that creates the discussion
        version = group_version(group_id=group_id)
        document = version.document
        require_deployed_members(document)
        require_room_for_a_pause(owner_id=user.pk)
        discussion = GroupConversation.objects.create(
            group_id=version.group_id,
            group_version=version.version,
            owner=user,
            question=question,
            state=DiscussionState.IN_PROGRESS,
            turn_alive_until=lease_expiry(),
        )
        append_audit_entry(
            subject_type=SubjectType.DISCUSSION,
            subject_id=discussion.id,
            verb="hitl.discussion.started",
            actor=user.get_username(),
            detail={"groupId": str(version.group_id), "groupVersion": version.version},
        )
    run = Run(discussion, document, events)
    run.emit(ev.DISCUSSION_STARTED, groupId=str(discussion.group_id), groupVersion=version.version)
    with kept_alive(lambda until: renew_lease(discussion.pk, until), what=f"discussion {discussion.pk}"):
        run_from(run, 0)
    return discussion


def run_from(run: Run, start: int) -> None:
    """Run the phases from ``start`` on until the discussion ends or pauses; every outcome is saved,
    audited and told to the run's sink with a closing event."""
    discussion = run.discussion
    try:
        if _run_phases(run, start):
            return
    except _Stop as stop:
        phase = run.document["phases"][min(discussion.phase_index, len(run.document["phases"]) - 1)]
        run.entry(phase, None, Answer(ERROR, note=str(stop)))
        finish(run, DiscussionState.FAILED)
        run.emit(ev.GROUP_ERROR, state=DiscussionState.FAILED, message=str(stop))
        return
    except _Cancelled as cancelled:
        _end_cancelled(run, cancelled)
        return
    except Exception:
        logger.exception("discussion %s failed", discussion.id)
        finish(run, DiscussionState.FAILED)
        run.emit(ev.GROUP_ERROR, state=DiscussionState.FAILED, message="the discussion failed (server error)")
        raise
    try:
        with transaction.atomic():  # its own (a savepoint inside a caller's), whatever finish's is
            finish(run, DiscussionState.COMPLETED, unless_cancelled=True)  # a cancel in the last phase wins
    except _Cancelled as cancelled:
        _end_cancelled(run, cancelled)
        return
    run.emit(ev.GROUP_COMPLETE, state=DiscussionState.COMPLETED)


def _end_cancelled(run: Run, cancelled: _Cancelled) -> None:
    finish(run, DiscussionState.CANCELLED, by=str(cancelled) or None)
    run.emit(ev.CANCELLED, state=DiscussionState.CANCELLED, cancelledBy=str(cancelled) or None)


def finish(run: Run, state: str, *, by: str | None = None, unless_cancelled: bool = False) -> None:
    """The discussion's end: its state, the fingerprint and the lease cleared, audited (``by``: who
    cancelled it; ``unless_cancelled``: ``_Cancelled`` instead when a cancel is recorded). Part of the
    caller's transaction when it has one."""
    discussion = run.discussion
    with transaction.atomic(savepoint=False):
        discussion.state = state
        discussion.last_pause_fingerprint = ""
        discussion.turn_alive_until = None
        if unless_cancelled:
            run.save_unless_cancelled("turn_alive_until")
        else:
            run.save("turn_alive_until")
        append_audit_entry(
            subject_type=SubjectType.DISCUSSION,
            subject_id=discussion.id,
            verb="hitl.discussion.finished",
            actor=by or GROUP_ACTOR.name,
            automated=by is None,
            detail={"state": state, "turnCount": discussion.turn_count},
        )


def _run_phases(run: Run, start: int) -> bool:
    """Run the phases from ``start``; True when the discussion paused at a gate."""
    phases = run.document["phases"]
    for index in range(start, len(phases)):
        phase = phases[index]
        run.discussion.phase_index = index
        run.save_with_next_write()
        run.emit(ev.PHASE_STARTED, phaseIndex=index, phaseName=phase["name"], phaseType=phase["type"])
        if phase["type"] == EXECUTE:
            _run_execute_phase(run, phase)
        else:
            _run_rounds(run, phase)
        kind = gates.gate_after(run.document, phase, task_list.of_phase(run.discussion.tasks, phase["name"]))
        if kind is not None and _pause_at(run, index, kind):
            return True
        if index + 1 < len(phases):
            run.check_cancel()  # before the next phase starts (after the last one: in the end's transaction)
    return False


def _pause_at(run: Run, index: int, kind: str) -> bool:
    """Open the gate's pause (True), fail on no progress, or stop for a cancel that came meanwhile."""
    discussion, phase = run.discussion, run.document["phases"][index]
    # A cancel before the gate ends the discussion, no pause: checked here before the no-progress guard,
    # and by the gate's own write (a PHASE gate has no other check).
    if kind == gates.TASK:
        run.check_cancel()
        fingerprint = task_list.fingerprint(
            phase_index=index,
            tasks=task_list.of_phase(discussion.tasks, phase["name"]),
            turn_count=discussion.turn_count,
        )
        if fingerprint == discussion.last_pause_fingerprint:
            raise _Stop(gates.NO_PROGRESS.format(name=phase["name"]))
        discussion.last_pause_fingerprint = fingerprint
    pause = gates.open_gate(discussion=discussion, document=run.document, index=index, kind=kind)
    if pause is None:
        run.check_cancel()
        raise _Cancelled("")
    run.emit(
        ev.AWAITING_APPROVAL,
        state=DiscussionState.AWAITING_APPROVAL,
        pauseId=str(pause.id),
        phaseIndex=index,
        phaseName=phase["name"],
        reason=pause.reason,
        granularity=gates.granularity(run.document),
        pauseType=kind,
        awaitingTaskIds=pause.details.get("awaitingTaskIds", []),
        deadline=pause.due_at.isoformat() if pause.due_at else None,
    )
    return True


def _run_rounds(run: Run, phase: dict[str, Any]) -> None:
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
            run.turn(agent_id, prompt, partial(run.entry, phase, agent_id, round=round_number))


# --- EXECUTE ------------------------------------------------------------------------------------------


def _planned_tasks(run: Run, phase: dict[str, Any]) -> list[dict[str, Any]]:
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
    answer = run.turn(planner, prompt, partial(run.entry, phase, planner))
    if answer.status != OK:
        raise _Stop(f"the planner's turn was {answer.status}: there is no task plan")
    try:
        return parse_task_plan(answer.content, members=run.names)
    except BadTaskPlan as bad:
        raise _Stop(str(bad)) from None


def _phase_tasks(run: Run, phase: dict[str, Any]) -> list[dict[str, Any]]:
    """The phase's task list: planned on the phase's first run, kept when it runs on after a TASK gate."""
    existing = task_list.of_phase(run.discussion.tasks, phase["name"])
    if existing:
        return existing
    tasks = [
        {
            "phase": phase["name"],
            "id": task["id"],
            "description": task["description"],
            "assignee": member_id(task["assignee"]),
            "dependsOn": list(task.get("dependsOn") or []),
            "status": task_list.PENDING,
            "result": None,
        }
        for task in _planned_tasks(run, phase)
    ]
    run.discussion.tasks.extend(tasks)
    run.save_with_next_write()
    return tasks


def _run_execute_phase(run: Run, phase: dict[str, Any]) -> None:
    """Run waves of ready tasks until none is left. With TASK gating a spent budget ends the phase (its
    gate then pauses with the tasks still to run) rather than failing the discussion."""
    tasks = _phase_tasks(run, phase)
    gated = gates.task_gated(run.document, phase)
    while True:
        for failed in task_list.fail_dependents_of_failed(tasks):
            run.task_changed(failed)
        wave = task_list.ready(tasks)
        if not wave:
            return
        for task in wave:
            if gated and run.budget_spent():
                return
            _run_task(run, phase, task, tasks, gated=gated)


def _run_task(
    run: Run, phase: dict[str, Any], task: dict[str, Any], tasks: list[dict[str, Any]], *, gated: bool
) -> None:
    by_id = {other["id"]: other for other in tasks}
    assignee = task["assignee"]
    prompt = task_prompt(
        question=run.discussion.question,
        phase=phase,
        role=run.roles.get(assignee),
        task=task,
        dependencies=[by_id[d] for d in task["dependsOn"] if d in by_id],
    )
    run.check_budget()  # a task the budget does not reach stays as it is
    task["status"] = task_list.IN_PROGRESS
    run.turn(assignee, prompt, partial(_task_done, run, phase, task, gated=gated))
    run.task_changed(task)


def _task_done(
    run: Run, phase: dict[str, Any], task: dict[str, Any], answer: Answer, *, gated: bool
) -> dict[str, Any] | None:
    """The task's result, or its failure with a transcript entry (returned)."""
    if answer.status == OK:
        task["status"] = task_list.AWAITING_APPROVAL if gated else task_list.COMPLETED
        task["result"] = answer.content
        task.pop("note", None)
        return None
    task["status"], task["note"] = task_list.FAILED, answer.note
    return run.entry(phase, task["assignee"], answer, task=task["id"])
