"""Conversation services: start, say, undo, redo, end, cancel, and continuing after a decision.

A turn of an agent whose tasks are all local runs in one transaction: the claim, the window read,
the pipeline and the commit (conversations.local_turns). Any other turn may be slow (its http calls,
its model), so it runs outside a transaction: it first commits the move to IN_PROGRESS with a
compare-and-set, runs the pipeline under a lease, then commits the step, the new state and, when it
paused, the Pause, in one transaction guarded by IN_PROGRESS and by no cancel having been recorded.
A cancel recorded meanwhile stops the turn before its next task (conversations.cancels); anything
the turn raises leaves the conversation ERROR in the same request (conversations.turn_failures).
A turn answers with what it committed (``TurnResult``), so the snapshot need not be read back.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals.actors import system_actor
from approvals.decision_notices import rejection_text
from approvals.decisions import finish_pause
from approvals.leases import kept_alive, lease_expiry
from approvals.models import Pause, PauseKind, SubjectType, Surface, Verdict
from approvals.pause_caps import require_room_for_a_pause
from approvals.pauses import open_pause, rule_pause_reason
from approvals.self_approval import effective_allow_self_approval
from approvals.surfaces import ContinuationNotStarted
from common import rows
from common.errors import WrongState
from conversations import nested_agents
from conversations.acting_identity import approver_caller, continuation_caller
from conversations.agents import OnVersion, deployed_version, newest_deployed_version
from conversations.cancels import (
    cancel_check,
    cancel_conversation,
    end_conversation,
    finish_cancelled_turn,
    finish_unstarted_continuation,
)
from conversations.errors import NotDeployed
from conversations.lifecycle import (
    Cancelled,
    Completed,
    ConfigDrift,
    LifecycleOutcome,
    Paused,
    PauseRequest,
    ResumePoint,
    Stopped,
    config_drift,
    run_lifecycle,
)
from conversations.local_turns import runs_in_one_transaction
from conversations.memory_store import (
    caller_for,
    claim_turn,
    commit_turn_state,
    memory_for_new_turn,
    memory_for_paused_turn,
    save_step,
)
from conversations.models import AgentVersion, Conversation, ConversationState, ConversationStep
from conversations.pipeline.llm_task import apply_config_drift
from conversations.pipeline.memory import CONVERSATION_START, PAUSE_CONVERSATION, ConversationMemory
from conversations.pipeline.registry import TurnContext
from conversations.pipeline.tasks import register_builtin_tasks
from conversations.snapshots import snapshot_steps_in
from conversations.turn_failures import DATABASE_UNAVAILABLE, fail_turn, failure_text, run_guarded
from toolgate.batches import store_batch
from toolgate.models import PendingToolBatch
from toolgate.no_progress import act_on_trip, record_trip
from toolgate.step_journal import Continuing

logger = logging.getLogger(__name__)

S = ConversationState
TALKABLE = (S.READY, S.ERROR, S.EXECUTION_INTERRUPTED)
AWAITING_MESSAGE = (
    "Conversation is awaiting human approval (current state: AWAITING_HUMAN) - a reviewer must resolve "
    "it via POST /agents/{id}/resume (or cancel) before new input is accepted"
)


def _busy(conversation_id: Any, state: str | None) -> WrongState:
    if state == S.AWAITING_HUMAN:
        return WrongState(AWAITING_MESSAGE.replace("{id}", str(conversation_id)), current_state=state)
    if state == S.IN_PROGRESS:
        return WrongState(
            "Conversation is processing another turn - your message was not processed; retry shortly "
            "(current state: IN_PROGRESS)",
            current_state=state,
        )
    return WrongState(f"Conversation has ended (current state: {state})", current_state=state)


def renew_turn(conversation_id: object, until: datetime) -> int:
    """Push the lease of the conversation's running turn to ``until`` (its heartbeat)."""
    return Conversation.objects.filter(pk=conversation_id, state=S.IN_PROGRESS).update(turn_alive_until=until)


def _turn_context(
    conversation: Conversation, document: dict[str, Any], continuing: Pause | None = None
) -> TurnContext:
    return TurnContext(
        agent_document=document,
        conversation_id=str(conversation.id),
        agent_id=str(conversation.agent_id),
        environment=conversation.environment,
        check_cancelled=cancel_check(conversation.pk),
        talk_to_agent=_talk_to_nested_agent,
        continuing=Continuing.of(continuing) if continuing is not None else None,
        approver=approver_caller(continuing) if continuing is not None else None,
    )


def _talk_to_nested_agent(**kwargs: Any) -> dict[str, Any]:
    """A tool's talk to another agent: a nested conversation run by this module's own turn services."""
    return nested_agents.talk_to_agent(say=say, start_conversation=start_conversation, **kwargs)


def _deployed_version_of(conversation: Conversation) -> AgentVersion | None:
    return deployed_version(
        agent_id=conversation.agent_id,
        version=conversation.agent_version,
        environment=conversation.environment,
    )


def _run(
    document: dict[str, Any], memory: ConversationMemory, turn: TurnContext, resume: ResumePoint | None = None
) -> LifecycleOutcome | Exception:
    register_builtin_tasks()
    try:
        return run_lifecycle(document, memory, turn, resume=resume)
    except DATABASE_UNAVAILABLE:
        raise
    except Exception as exc:
        return _failed(memory, turn, exc)


def _failed(memory: ConversationMemory, turn: TurnContext, exc: Exception) -> Exception:
    """The turn fails: the conversation records ERROR, the error is on the step."""
    logger.error("turn of conversation %s failed", turn.conversation_id, exc_info=exc)
    memory.current.data["error"] = failure_text(exc)
    return exc


STATE_AFTER = {Completed: S.READY, Stopped: S.ENDED, Paused: S.AWAITING_HUMAN}


@dataclass(frozen=True)
class Committed:
    """What a turn's commit left: the conversation's state, and the turn's memory when the turn's own
    result was written (not when a cancel or a failure ended it)."""

    state: str
    memory: ConversationMemory | None = None


@dataclass(frozen=True)
class TurnResult:
    """A conversation as a turn left it, and the live steps its snapshot shows when the turn held them
    all (``snapshots.snapshot(result.conversation, steps=result.steps)``; None: read them)."""

    conversation: Conversation
    steps: list[dict[str, Any]] | None = None


def _result(conversation: Conversation, committed: Committed | str) -> TurnResult:
    """The conversation as the turn committed it, without reading it back when the turn's own result won."""
    if not isinstance(committed, Committed) or committed.memory is None:
        conversation.refresh_from_db()
        return TurnResult(conversation)
    conversation.state = committed.state
    conversation.properties = committed.memory.properties
    conversation.cancel_requested_at, conversation.cancel_requested_by = None, ""
    return TurnResult(conversation, snapshot_steps_in(committed.memory))


def _commit(
    conversation: Conversation,
    document: dict[str, Any],
    memory: ConversationMemory,
    outcome: LifecycleOutcome | Exception,
    *,
    row: ConversationStep | None = None,
    resolving: Pause | None = None,
    raised_by_id: int | None = None,
    first_turn: bool = False,
) -> Committed:
    """Write the turn's result if the conversation is still ours (IN_PROGRESS, no cancel recorded).
    A turn that was cancelled ends through finish_cancelled_turn.

    ``raised_by_id`` is the user whose turn this is; a pause it opens records them (separation of duties).
    """
    if isinstance(outcome, Cancelled):
        return Committed(
            finish_cancelled_turn(
                conversation,
                memory,
                row=row,
                resolving=resolving,
                stopped_before={"workflowId": outcome.workflow_id, "taskIndex": outcome.task_index},
            )
        )
    state = S.ERROR if isinstance(outcome, Exception) else STATE_AFTER[type(outcome)]
    with transaction.atomic(savepoint=False):  # inside a one-transaction turn: fails that turn whole
        won = commit_turn_state(
            conversation,
            running=S.IN_PROGRESS,
            state=state,
            properties=memory.properties,
            appends_step=row is None,
        )
        if won is None:  # a cancel landed during the last task, or the conversation was ended or interrupted
            return Committed(
                finish_cancelled_turn(conversation, memory, row=row, resolving=resolving, stopped_before=None)
            )
        if resolving is not None:
            finish_pause(
                pause=resolving,
                outcome="failed" if state == S.ERROR else "completed",
                detail={"error": memory.current.data.get("error")} if state == S.ERROR else None,
            )
        if isinstance(outcome, Paused) and outcome.request.kind == PauseKind.RULE:
            memory.current.data["hitl:status"] = "awaiting_approval"
            memory.current.outputs["hitl:status"] = "awaiting_approval"
        save_step(
            conversation, memory.current, memory.properties, row=row, counted=True, drop_undone=not first_turn
        )
        if isinstance(outcome, Paused):
            _open_pause(conversation, document, memory, outcome, raised_by_id=raised_by_id)
    return Committed(state, memory)


def _open_pause(
    conversation: Conversation,
    document: dict[str, Any],
    memory: ConversationMemory,
    paused: Paused,
    *,
    raised_by_id: int | None,
) -> Pause:
    """Open the pause the turn asked for, with what its request carries, inside the turn's commit."""
    request = paused.request
    hitl_config = document.get("hitlConfig")
    pause = open_pause(
        surface=Surface.REGULAR,
        kind=request.kind,
        subject_type=SubjectType.CONVERSATION,
        subject_id=conversation.pk,
        owner_id=conversation.owner_id,
        reason=request.reason if request.kind != PauseKind.RULE else rule_pause_reason(hitl_config),
        hitl_config=request.timeout_config if request.timeout_config is not None else hitl_config,
        bookmark={"workflowId": paused.workflow_id, "taskIndex": paused.task_index},
        details={**request.details, "actions": list(memory.current.actions)},
        tool_names=request.tool_names,
        agent_id=conversation.agent_id,
        agent_version=conversation.agent_version,
        raised_by_id=raised_by_id,
        allow_self_approval=effective_allow_self_approval(hitl_config, request.matched_rules),
    )
    _store_with_pause(pause, request)
    return pause


def _store_with_pause(pause: Pause, request: PauseRequest) -> None:
    """A pause and what belongs to it commit together: the gated batch, and the audit of a guard that
    tripped on it. A trip that rejects or cancels the pause acts once the pause is committed."""

    if request.tool_batch is not None:
        store_batch(pause, request.tool_batch)
    trip = request.guard_trip
    if trip is not None and request.tool_batch is not None:
        record_trip(pause, trip, request.tool_batch)
        if trip.decides_the_pause:
            transaction.on_commit(lambda: act_on_trip(pause, trip))


def start_conversation(
    *,
    user: Any,
    agent_id: Any,
    environment: str,
    context: dict[str, Any] | None = None,
    check_pause_caps: bool = True,
) -> TurnResult:
    """Start on the newest version deployed in ``environment``; the conversation stays on it.

    Refused (409 LIMIT_REACHED) with nothing created while the user or the agent is at its cap of pending
    pauses (approvals.pause_caps); ``check_pause_caps=False`` only for a group member's turn, whose pause
    never stays open. An agent whose tasks are all local starts in one transaction
    (conversations.local_turns): the conversation and its first step commit together, or neither does."""
    version = newest_deployed_version(agent_id=agent_id, environment=environment)
    if check_pause_caps:
        require_room_for_a_pause(owner_id=user.pk, agent_id=version.agent_id)

    def created() -> Conversation:
        conversation = Conversation(
            agent=version.agent,
            agent_version=version.version,
            environment=environment,
            owner=user,
            state=S.IN_PROGRESS,
            context=context or {},
            turn_started_at=timezone.now(),
            turn_alive_until=lease_expiry(),
        )
        rows.insert(conversation)
        return conversation

    def turn(conversation: Conversation) -> Committed:
        memory = memory_for_new_turn(
            conversation, user_input="", context=context or {}, caller=caller_for(user), first_turn=True
        )
        memory.current.actions.append(CONVERSATION_START)
        outcome = _run(version.document, memory, _turn_context(conversation, version.document))
        return _commit(conversation, version.document, memory, outcome, raised_by_id=user.pk, first_turn=True)

    if runs_in_one_transaction(version.document):
        try:
            with transaction.atomic():
                conversation = created()
                committed = turn(conversation)
        except DATABASE_UNAVAILABLE:
            raise  # nothing of it landed, or all of it did: either way not a failed first turn
        except Exception as exc:  # nothing of it landed: start it again, to record the failed first turn
            with transaction.atomic():
                conversation = created()
                return _result(conversation, fail_turn(conversation, user_input="", error=exc))
        return _result(conversation, committed)
    conversation = created()
    with _turn_kept_alive(conversation):
        outcome = run_guarded(conversation, lambda: turn(conversation), user_input="")
    return _result(conversation, outcome)


def say(
    *,
    conversation: Conversation | OnVersion,
    user: Any,
    user_input: str,
    context: dict[str, Any] | None,
    check_pause_caps: bool = True,
) -> TurnResult:
    """Run one turn. While paused the input is refused (409) and not consumed, and so it is while the
    conversation's owner or its agent is at its cap of pending pauses (409 LIMIT_REACHED,
    approvals.pause_caps; ``check_pause_caps=False`` only for a group member's turn).

    A turn that cannot start (agent no longer deployed) leaves the conversation as it was; once it
    started, whatever it raises leaves the conversation ERROR with the error on the step (never
    IN_PROGRESS), and the snapshot says so. An agent whose tasks are all local runs the turn in one
    transaction (conversations.local_turns); any other turn commits its claim first and runs under a lease.
    ``conversation`` may come with its deployed version read with it (``selectors.talk_on_version``).
    """
    if isinstance(conversation, OnVersion):
        conversation, version = (
            conversation.conversation,
            _version_for_turn(conversation.conversation, conversation.version),
        )
    else:
        version = _version_for_turn(conversation, _deployed_version_of(conversation))
    if check_pause_caps and conversation.state in TALKABLE:  # a busy one is refused for being busy
        require_room_for_a_pause(
            owner_id=conversation.owner_id,
            agent_id=conversation.agent_id,
            for_other=conversation.owner_id != user.pk,
        )

    def claimed() -> bool:
        return claim_turn(
            conversation,
            running=S.IN_PROGRESS,
            talkable=TALKABLE,
            started=timezone.now(),
            alive_until=lease_expiry(),
        )

    def turn() -> Committed:
        memory = memory_for_new_turn(
            conversation, user_input=user_input, context=context or {}, caller=caller_for(user)
        )
        outcome = _run(version.document, memory, _turn_context(conversation, version.document))
        return _commit(conversation, version.document, memory, outcome, raised_by_id=user.pk)

    if runs_in_one_transaction(version.document):
        try:
            with transaction.atomic():
                if not claimed():
                    raise _busy(conversation.pk, _state_of(conversation))
                committed = turn()
        except (WrongState, *DATABASE_UNAVAILABLE):
            raise
        except Exception as exc:  # the turn's transaction rolled back: claim again, to record the failure
            with transaction.atomic():
                if not claimed():
                    raise _busy(conversation.pk, _state_of(conversation)) from exc
                return _result(conversation, fail_turn(conversation, user_input=user_input, error=exc))
        return _result(conversation, committed)
    if not claimed():
        raise _busy(conversation.pk, _state_of(conversation))
    with _turn_kept_alive(conversation):
        outcome = run_guarded(conversation, turn, user_input=user_input)
    return _result(conversation, outcome)


def _state_of(conversation: Conversation) -> str | None:
    return Conversation.objects.filter(pk=conversation.pk).values_list("state", flat=True).first()


def _version_for_turn(conversation: Conversation, version: AgentVersion | None) -> AgentVersion:
    """The deployed version a new turn runs on (None: not deployed), read before the turn claims the
    conversation: a conversation that could not take input anyway says so (409) before the agent is
    found undeployed."""
    if version is None:
        state = _state_of(conversation)
        if state not in TALKABLE:
            raise _busy(conversation.pk, state)
        raise NotDeployed(
            f"Agent {conversation.agent_id} version {conversation.agent_version} is not deployed in "
            f"{conversation.environment}"
        )
    return version


def _turn_kept_alive(conversation: Conversation) -> AbstractContextManager[None]:
    """The turn's lease is renewed while it runs; if this process dies, recovery interrupts it in seconds."""
    return kept_alive(lambda until: renew_turn(conversation.pk, until), what=f"turn of {conversation.pk}")


def _apply_decision(memory: ConversationMemory, pause: Pause) -> None:
    """Make the decision visible to the agent: step data, template outputs and a property."""
    step = memory.current
    step.data["hitl:decision_verdict"] = pause.verdict
    step.data["hitl:decision_note"] = pause.note
    step.data["hitl:decision_by"] = pause.decided_by
    step.data.pop("hitl:status", None)
    step.outputs.pop("hitl:status", None)
    step.outputs["hitlDecision"] = pause.verdict
    step.outputs["hitlDecisionNote"] = pause.note
    step.outputs["hitlDecisionAutomated"] = pause.automated  # a timeout or a guard, not a human
    memory.properties["hitlVerdict"] = pause.verdict
    step.actions[:] = [a for a in step.actions if a != PAUSE_CONVERSATION]


def _resume_point(pause: Pause) -> ResumePoint:
    """Where the decided pause's turn goes on: after the task that paused on a rule, back into the llm
    task that paused on tools, with its frozen batch (the decision applied is this pause's)."""

    batch = None
    if pause.kind == PauseKind.TOOL_CALL:
        batch = PendingToolBatch.objects.filter(pause=pause).first()
        if batch is not None:
            batch.pause = pause
    offset = 1 if pause.kind == PauseKind.RULE else 0
    return ResumePoint(
        workflow_id=pause.bookmark["workflowId"],
        task_index=int(pause.bookmark["taskIndex"]) + offset,
        pause_id=str(pause.id),
        kind=pause.kind,
        tool_batch=batch,
    )


def continue_after_decision(pause: Pause, checked: OnVersion | None = None) -> TurnResult:
    """The continuation of a decided pause of a conversation: in the deciding process right after the
    decision committed (``checked``: the conversation and version its check read, as the decision's
    compare-and-set left them), or on a django-q2 worker (read afresh).

    Whatever goes wrong before the pipeline runs means the continuation did not start (the pause is
    restored, or ends cancelled if a cancel came meanwhile); once it runs, a failure leaves the
    conversation ERROR and the pause failed, in the same run. Returns the conversation as it left it.
    Run here on an agent whose tasks are all local, it reads, runs and commits in one transaction.
    """
    if checked is not None:
        # begin_resume moved it to IN_PROGRESS and cleared any earlier cancel, in the decision's commit;
        # a cancel or end since then loses the commit's compare-and-set like any other.
        conversation, version = checked.conversation, checked.version
        conversation.state, conversation.cancel_requested_at, conversation.cancel_requested_by = (
            S.IN_PROGRESS,
            None,
            "",
        )
    else:
        conversation = Conversation.objects.select_related("agent").get(pk=pause.subject_id)
        version = None
    if conversation.state != S.IN_PROGRESS:
        finish_unstarted_continuation(conversation, pause)
        return TurnResult(conversation)
    if version is not None and runs_in_one_transaction(version.document):
        return _continue_in_one_transaction(conversation, pause, version)
    memory, row, run_and_commit = _prepared(conversation, pause, version)
    committed = run_guarded(
        conversation, run_and_commit, user_input=memory.current.input, row=row, resolving=pause
    )
    return _result(conversation, committed)


def _continue_in_one_transaction(
    conversation: Conversation, pause: Pause, version: AgentVersion
) -> TurnResult:
    """Read the paused turn, run it on and commit, in one transaction. What fails before it runs did not
    start it (ContinuationNotStarted); what fails after rolled it back whole, and is recorded anew."""
    prepared: tuple[ConversationMemory, ConversationStep, Any] | None = None
    try:
        with transaction.atomic():
            prepared = _prepared(conversation, pause, version)
            committed = prepared[2]()
    except DATABASE_UNAVAILABLE:
        raise
    except Exception as exc:
        if prepared is None:
            raise
        memory, row, _ = prepared
        return _result(
            conversation,
            fail_turn(conversation, user_input=memory.current.input, error=exc, row=row, resolving=pause),
        )
    return _result(conversation, committed)


def _prepared(
    conversation: Conversation, pause: Pause, version: AgentVersion | None
) -> tuple[ConversationMemory, ConversationStep, Any]:
    """The paused turn's memory, its step row, and the function that runs it on and commits it."""

    try:
        version, memory, row, resume = _prepare_continuation(conversation, pause, version)
    except (ContinuationNotStarted, *DATABASE_UNAVAILABLE):
        raise
    except Exception as exc:
        logger.exception("continuation of pause %s could not be prepared", pause.id)
        raise ContinuationNotStarted(failure_text(exc)) from exc
    document = version.document
    turn = _turn_context(conversation, document, continuing=pause)

    def run_and_commit() -> Committed:
        outcome: LifecycleOutcome | Exception = Completed()
        if isinstance(resume, ConfigDrift):
            outcome = _failed(memory, turn, resume)
        elif resume is not None:
            outcome = _run(document, memory, turn, resume=resume)
        # A pause met later in the same turn was still raised by the user whose turn it is, not its decider.
        return _commit(
            conversation, document, memory, outcome, row=row, resolving=pause, raised_by_id=pause.raised_by_id
        )

    return memory, row, run_and_commit


def _prepare_continuation(
    conversation: Conversation, pause: Pause, version: AgentVersion | None = None
) -> tuple[AgentVersion, ConversationMemory, ConversationStep, ResumePoint | ConfigDrift | None]:
    """The agent version (``version``: as the decision just checked it; else read), the paused turn's
    memory with the decision applied, its step row, and where the pipeline resumes (None: it does not
    run again, a rejected rule pause only posts the rejection; ConfigDrift: the paused workflow is gone,
    the turn fails)."""

    if version is None:
        version = _deployed_version_of(conversation)
    if version is None:
        raise ContinuationNotStarted("agent version no longer deployed")
    try:
        memory, row = memory_for_paused_turn(conversation, caller=continuation_caller(pause))
    except LookupError as exc:
        raise ContinuationNotStarted(str(exc)) from None
    _apply_decision(memory, pause)
    if pause.kind == PauseKind.RULE and pause.verdict == Verdict.REJECTED:
        memory.current.output.append(rejection_text(pause))
        return version, memory, row, None
    point = _resume_point(pause)
    drift = config_drift(version.document, point)
    if drift is None:
        return version, memory, row, point
    if point.kind == PauseKind.TOOL_CALL:
        apply_config_drift(memory, point, conversation_id=conversation.pk, pause=pause, reason=drift.reason)
        point = point.past_paused_task()  # no gated call runs; the rest of the turn does
    return version, memory, row, ConfigDrift(drift.reason) if drift.workflow_gone else point


def undo(*, conversation: Conversation) -> Conversation:
    return _move_history(conversation, undo=True)


def redo(*, conversation: Conversation) -> Conversation:
    return _move_history(conversation, undo=False)


def _move_history(conversation: Conversation, *, undo: bool) -> Conversation:
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
        if locked.state not in TALKABLE:
            raise WrongState(
                f"Cannot {'undo' if undo else 'redo'} while the conversation is {locked.state}",
                current_state=locked.state,
            )
        # live steps are the indexes 0..step_count-1, the undone ones follow (conversations.memory_store)
        steps = ConversationStep.objects.filter(conversation=locked)
        if undo:
            target = steps.filter(undone=False, index=locked.step_count - 1).first()
        else:
            target = steps.filter(undone=True, index=locked.step_count).first()
        if target is None:
            raise WrongState(f"Nothing to {'undo' if undo else 'redo'}", current_state=locked.state)
        target.undone = undo
        target.save(update_fields=["undone"])
        locked.step_count += -1 if undo else 1
        latest = steps.filter(undone=False, index=locked.step_count - 1).only("properties").first()
        locked.properties = latest.properties if latest else {}
        locked.save(update_fields=["properties", "step_count", "updated_at"])
    conversation.refresh_from_db()
    return conversation


__all__ = [
    "start_conversation",
    "say",
    "undo",
    "redo",
    "end_conversation",
    "cancel_conversation",
    "continue_after_decision",
    "system_actor",
]
