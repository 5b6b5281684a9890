"""Conversation services: start, say, undo, redo, end, cancel, and continuing after a decision.

A turn runs outside any transaction (its http calls may be slow): it first moves the conversation
to IN_PROGRESS with a compare-and-set, runs the pipeline, then commits the step, the new state and,
when it paused, the Pause, in one transaction guarded by IN_PROGRESS and by no cancel having been
recorded. A cancel recorded meanwhile stops the turn before its next task (conversations.cancels);
anything the turn raises leaves the conversation ERROR in the same request (conversations.turn_failures).
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals.actors import system_actor
from approvals.audit import append_audit_entry
from approvals.decision_notices import rejection_text
from approvals.decisions import finish_pause
from approvals.errors import NotDeployed, WrongState
from approvals.models import Pause, PauseKind, SubjectType, Surface, Verdict
from approvals.pauses import open_pause, rule_pause_reason
from approvals.self_approval import effective_allow_self_approval
from conversations.agents import agent_version, is_deployed
from conversations.cancels import (
    cancel_check,
    cancel_conversation,
    end_conversation,
    finish_cancelled_turn,
    finish_unstarted_continuation,
)
from conversations.lifecycle import LifecycleOutcome, run_lifecycle
from conversations.memory_store import (
    caller_for,
    memory_for_new_turn,
    memory_for_paused_turn,
    save_step,
)
from conversations.models import AgentVersion, Conversation, ConversationState, ConversationStep
from conversations.pipeline.memory import CONVERSATION_START, PAUSE_CONVERSATION, ConversationMemory
from conversations.pipeline.registry import TurnContext
from conversations.pipeline.tasks import register_builtin_tasks
from conversations.turn_failures import failure_text, run_guarded

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


def _turn_context(conversation: Conversation, document: dict[str, Any]) -> TurnContext:
    return TurnContext(
        agent_document=document,
        conversation_id=str(conversation.id),
        agent_id=str(conversation.agent_id),
        environment=conversation.environment,
        check_cancelled=cancel_check(conversation.pk),
    )


def _require_deployed(conversation: Conversation) -> None:
    if not is_deployed(
        agent_id=conversation.agent_id, version=conversation.agent_version, environment=conversation.environment
    ):
        raise NotDeployed(
            f"Agent {conversation.agent_id} version {conversation.agent_version} is not deployed in "
            f"{conversation.environment}"
        )


def _run(document: dict[str, Any], memory: ConversationMemory, turn: TurnContext,
         resume_at: tuple[str, int] | None = None) -> LifecycleOutcome | Exception:
    register_builtin_tasks()
    try:
        return run_lifecycle(document, memory, turn, resume_at=resume_at)
    except Exception as exc:  # the turn fails, the conversation records ERROR
        logger.exception("turn of conversation %s failed", turn.conversation_id)
        memory.current.data["error"] = failure_text(exc)
        return exc


def _commit(
    conversation: Conversation,
    document: dict[str, Any],
    memory: ConversationMemory,
    outcome: LifecycleOutcome | Exception,
    *,
    row: ConversationStep | None = None,
    resolving: Pause | None = None,
    raised_by_id: int | None = None,
) -> str:
    """Write the turn's result if the conversation is still ours (IN_PROGRESS, no cancel recorded);
    returns the new state. A turn that was cancelled ends through finish_cancelled_turn.

    ``raised_by_id`` is the user whose turn this is; a pause it opens records them (separation of duties).
    """
    if isinstance(outcome, LifecycleOutcome) and outcome.kind == "cancelled":
        return finish_cancelled_turn(
            conversation, memory, row=row, resolving=resolving,
            stopped_before={"workflowId": outcome.workflow_id, "taskIndex": outcome.task_index})
    if isinstance(outcome, Exception):
        state = S.ERROR
    else:
        state = {"completed": S.READY, "stopped": S.ENDED, "paused": S.AWAITING_HUMAN}[outcome.kind]
    with transaction.atomic():
        won = Conversation.objects.filter(
            pk=conversation.pk, state=S.IN_PROGRESS, cancel_requested_at__isnull=True
        ).update(state=state, properties=memory.properties)
        if not won:  # a cancel landed during the last task, or the conversation was ended or interrupted
            return finish_cancelled_turn(conversation, memory, row=row, resolving=resolving, stopped_before=None)
        if resolving is not None:
            finish_pause(
                pause=resolving,
                outcome="failed" if state == S.ERROR else "completed",
                detail={"error": memory.current.data.get("error")} if state == S.ERROR else None,
            )
        if state == S.AWAITING_HUMAN and isinstance(outcome, LifecycleOutcome):
            if outcome.pause_kind == PauseKind.RULE:
                memory.current.data["hitl:status"] = "awaiting_approval"
                memory.current.outputs["hitl:status"] = "awaiting_approval"
        save_step(conversation, memory.current, memory.properties, row=row)
        if state == S.AWAITING_HUMAN and isinstance(outcome, LifecycleOutcome):
            hitl_config = document.get("hitlConfig")
            allow_self_approval = effective_allow_self_approval(hitl_config, outcome.matched_rules)
            if outcome.timeout_config is not None:
                hitl_config = outcome.timeout_config
            pause = open_pause(
                surface=Surface.REGULAR,
                kind=outcome.pause_kind,
                subject_type=SubjectType.CONVERSATION,
                subject_id=conversation.pk,
                owner_id=conversation.owner_id,
                reason=outcome.reason if outcome.pause_kind != PauseKind.RULE else rule_pause_reason(
                    document.get("hitlConfig")),
                hitl_config=hitl_config,
                bookmark={"workflowId": outcome.workflow_id, "taskIndex": outcome.task_index},
                details={**outcome.details, "actions": list(memory.current.actions)},
                tool_names=outcome.tool_names,
                agent_id=conversation.agent_id,
                agent_version=conversation.agent_version,
                raised_by_id=raised_by_id,
                allow_self_approval=allow_self_approval,
            )
            if outcome.on_committed is not None:
                outcome.on_committed(pause)
            if outcome.after_commit is not None:
                after = outcome.after_commit
                transaction.on_commit(lambda: after(pause))
    return state


def start_conversation(
    *, user: Any, agent_id: Any, environment: str, context: dict[str, Any] | None = None
) -> Conversation:
    """Start on the newest version deployed in ``environment``; the conversation stays on it."""
    from conversations.agents import deployed_versions, live_agent

    agent = live_agent(agent_id)
    versions = deployed_versions(agent_id=agent.pk, environment=environment)
    if not versions:
        raise NotDeployed(f"Agent {agent.pk} is not deployed in {environment}.")
    version = agent_version(agent.pk, versions[-1])
    conversation = Conversation.objects.create(
        agent=agent, agent_version=version.version, environment=environment, owner=user,
        state=S.IN_PROGRESS, context=context or {}, turn_started_at=timezone.now(),
    )

    def turn() -> str:
        memory = memory_for_new_turn(conversation, user_input="", context=context or {}, caller=caller_for(user))
        memory.current.actions.append(CONVERSATION_START)
        outcome = _run(version.document, memory, _turn_context(conversation, version.document))
        return _commit(conversation, version.document, memory, outcome, raised_by_id=user.pk)

    run_guarded(conversation, turn, user_input="")
    conversation.refresh_from_db()
    return conversation


def say(*, conversation: Conversation, user: Any, user_input: str, context: dict[str, Any] | None) -> Conversation:
    """Run one turn. While paused the input is refused (409) and not consumed.

    A turn that cannot start (agent no longer deployed) gives the conversation back as it was; once it
    started, whatever it raises leaves the conversation ERROR with the error on the step (never
    IN_PROGRESS), and the snapshot says so.
    """
    won = Conversation.objects.filter(pk=conversation.pk, state__in=TALKABLE).update(
        state=S.IN_PROGRESS, turn_started_at=timezone.now(), cancel_requested_at=None, cancel_requested_by=""
    )
    if not won:
        state = Conversation.objects.filter(pk=conversation.pk).values_list("state", flat=True).first()
        raise _busy(conversation.pk, state)
    previous_state = conversation.state
    try:
        _require_deployed(conversation)
        version = AgentVersion.objects.get(agent_id=conversation.agent_id, version=conversation.agent_version)
    except Exception:
        Conversation.objects.filter(pk=conversation.pk, state=S.IN_PROGRESS).update(state=previous_state)
        raise

    def turn() -> str:
        memory = memory_for_new_turn(
            conversation, user_input=user_input, context=context or {}, caller=caller_for(user)
        )
        outcome = _run(version.document, memory, _turn_context(conversation, version.document))
        return _commit(conversation, version.document, memory, outcome, raised_by_id=user.pk)

    run_guarded(conversation, turn, user_input=user_input)
    conversation.refresh_from_db()
    return conversation


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
    if pause.kind == PauseKind.TOOL_CALL:
        # the LLM task at the bookmark re-enters its tool loop with this pause's frozen batch
        step.data["hitl:tool_resume_pause"] = str(pause.id)


TOOL_DRIFT_TEXT = ("The pending approval could not be applied because the agent's configuration changed. "
                   "No gated action was executed.")


def _paused_llm_task_id(pause: Pause) -> str | None:
    from toolgate.models import PendingToolBatch

    return PendingToolBatch.objects.filter(pause=pause).values_list("llm_task_id", flat=True).first()


def _tool_task_still_there(document: dict[str, Any], pause: Pause) -> bool:
    """The llm task that paused is still at the bookmark (same id, still an llm task)."""
    batch = _paused_llm_task_id(pause)
    for workflow in document.get("workflows") or []:
        if workflow.get("id") == pause.bookmark.get("workflowId"):
            tasks = workflow.get("tasks") or []
            index = int(pause.bookmark.get("taskIndex", -1))
            if 0 <= index < len(tasks):
                task = tasks[index]
                return task.get("type") == "llm" and task.get("id") == batch
    return False


def continue_after_decision(pause: Pause) -> None:
    """The continuation of a decided pause of a conversation, run on a django-q2 worker.

    Whatever goes wrong before the pipeline runs means the continuation did not start (the pause is
    restored, or ends cancelled if a cancel came meanwhile); once it runs, a failure leaves the
    conversation ERROR and the pause failed, in the same run.
    """
    from approvals.surfaces import ContinuationNotStarted

    conversation = Conversation.objects.select_related("agent").get(pk=pause.subject_id)
    if conversation.state != S.IN_PROGRESS:
        finish_unstarted_continuation(conversation, pause)
        return
    try:
        version, memory, row, resume_at = _prepare_continuation(conversation, pause)
    except ContinuationNotStarted:
        raise
    except Exception as exc:
        logger.exception("continuation of pause %s could not be prepared", pause.id)
        raise ContinuationNotStarted(failure_text(exc)) from exc
    turn = _turn_context(conversation, version.document)

    def run_and_commit() -> str:
        outcome: LifecycleOutcome | Exception = LifecycleOutcome(kind="completed")
        if resume_at is not None:
            outcome = _run(version.document, memory, turn, resume_at=resume_at)
        # A pause met later in the same turn was still raised by the user whose turn it is, not its decider.
        return _commit(conversation, version.document, memory, outcome, row=row, resolving=pause,
                       raised_by_id=pause.raised_by_id)

    run_guarded(conversation, run_and_commit, user_input=memory.current.input, row=row, resolving=pause)


def _prepare_continuation(
    conversation: Conversation, pause: Pause
) -> tuple[AgentVersion, ConversationMemory, ConversationStep, tuple[str, int] | None]:
    """The agent version, the paused turn's memory with the decision applied, its step row, and where
    the pipeline resumes (None: it does not run again, a rejected rule pause only posts the rejection)."""
    from approvals.surfaces import ContinuationNotStarted

    if not is_deployed(
        agent_id=conversation.agent_id, version=conversation.agent_version, environment=conversation.environment
    ):
        raise ContinuationNotStarted("agent version no longer deployed")
    version = AgentVersion.objects.get(agent_id=conversation.agent_id, version=conversation.agent_version)
    try:
        memory, row = memory_for_paused_turn(conversation, caller=caller_for(pause.decided_by_user))
    except LookupError as exc:
        raise ContinuationNotStarted(str(exc)) from None
    _apply_decision(memory, pause)
    if pause.kind == PauseKind.RULE and pause.verdict == Verdict.REJECTED:
        memory.current.output.append(rejection_text(pause))
        return version, memory, row, None
    bookmark = pause.bookmark
    offset = 1 if pause.kind == PauseKind.RULE else 0
    if pause.kind == PauseKind.TOOL_CALL and not _tool_task_still_there(version.document, pause):
        memory.current.data.pop("hitl:tool_resume_pause", None)
        for text in memory.current.data.pop("hitl:pending_output", []):
            if text in memory.current.output:
                memory.current.output.remove(text)
        memory.current.output.append(TOOL_DRIFT_TEXT)
        append_audit_entry(
            subject_type=SubjectType.CONVERSATION, subject_id=conversation.pk, verb="hitl.tool.config_drift",
            actor="system:toolgate", automated=True, conversation_id=conversation.pk, pause_id=pause.id,
            epoch=pause.epoch,
            detail={"reason": f"the paused llm task '{_paused_llm_task_id(pause)}' is no longer at its place "
                              "in the workflow"},
        )
        offset = 1  # no gated call runs; the rest of the turn does
    return version, memory, row, (bookmark["workflowId"], int(bookmark["taskIndex"]) + offset)


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
    "start_conversation", "say", "undo", "redo", "end_conversation", "cancel_conversation",
    "continue_after_decision", "system_actor",
]
