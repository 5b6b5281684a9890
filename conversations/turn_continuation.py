"""Continuing a conversation's turn after its pause was decided.

The core runs the continuation (through the engine handler) in the deciding process right after the
decision committed, or on a django-q2 worker. The decision is applied to the paused turn's step, the
pipeline goes on where the pause left it (after the task that paused on a rule, back into the llm task
that paused on tools), and the turn commits like any other (conversations.turn_commits). What fails
before the pipeline runs means the continuation did not start (``ContinuationNotStarted``).
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from approvals.decision_notices import rejection_text
from approvals.engines import ContinuationFailedInDecision, ContinuationNotStarted
from approvals.models import Pause, PauseKind, Verdict
from conversations.acting_identity import continuation_caller
from conversations.agents import OnVersion
from conversations.cancels import finish_unstarted_continuation
from conversations.lifecycle import Completed, ConfigDrift, LifecycleOutcome, config_drift
from conversations.local_turns import runs_in_one_transaction
from conversations.models import AgentVersion, Conversation, ConversationStep
from conversations.pipeline.conversation_memory import PAUSE_CONVERSATION, ConversationMemory
from conversations.pipeline.llm_task import apply_config_drift
from conversations.pipeline.pausing import ResumePoint
from conversations.step_store import memory_for_paused_turn
from conversations.turn_commits import (
    Committed,
    S,
    TurnResult,
    commit_turn,
    deployed_version_of,
    record_failure,
    run_pipeline,
    turn_result,
)
from conversations.turn_failures import DATABASE_UNAVAILABLE, fail_turn, failure_text, run_guarded
from conversations.turns import turn_context
from toolgate.models import PendingToolBatch

logger = logging.getLogger(__name__)


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


def continue_after_decision(
    pause: Pause, checked: OnVersion | None = None, *, window: list[ConversationStep] | None = None
) -> TurnResult:
    """The continuation of a decided pause of a conversation: in the deciding process right after the
    decision committed (``checked``: the conversation and version its check read, as the decision's
    compare-and-set left them), or on a django-q2 worker (read afresh).

    Whatever goes wrong before the pipeline runs means the continuation did not start (the pause is
    restored, or ends cancelled if a cancel came meanwhile); once it runs, a failure leaves the
    conversation ERROR and the pause failed, in the same run. Returns the conversation as it left it.
    Run here on an agent whose tasks are all local, it reads, runs and commits in one transaction.
    ``window``: the paused turn's steps as the decision's ``begin_resume`` read them, when it runs in the
    decision's own transaction (not read again). There it takes no savepoint: whatever fails (but the
    database being unavailable) is raised as ``ContinuationFailedInDecision``, for the core to roll the
    decision back with it and decide again, continuing after that commit.
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
    if window is not None:
        return _continue_in_decision(conversation, pause, version, window)
    if version is not None and runs_in_one_transaction(version.document):
        return _continue_in_one_transaction(conversation, pause, version)
    memory, row, run_and_commit = _prepared(conversation, pause, version, window)
    committed = run_guarded(
        conversation, run_and_commit, user_input=memory.current.input, row=row, resolving=pause
    )
    return turn_result(conversation, committed)


def _continue_in_decision(
    conversation: Conversation, pause: Pause, version: AgentVersion | None, window: list[ConversationStep]
) -> TurnResult:
    """Run the paused turn on from ``window`` and write it, in the decision's own transaction, which
    holds the conversation's row: no savepoint, so a failure fails the decision with it."""
    try:
        _, _, run_and_commit = _prepared(conversation, pause, version, window)
        return turn_result(conversation, run_and_commit())
    except DATABASE_UNAVAILABLE:
        raise
    except Exception as exc:
        raise ContinuationFailedInDecision(failure_text(exc)) from exc


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
        return turn_result(
            conversation,
            fail_turn(conversation, user_input=memory.current.input, error=exc, row=row, resolving=pause),
        )
    return turn_result(conversation, committed)


def _prepared(
    conversation: Conversation,
    pause: Pause,
    version: AgentVersion | None,
    window: list[ConversationStep] | None = None,
) -> tuple[ConversationMemory, ConversationStep, Any]:
    """The paused turn's memory, its step row, and the function that runs it on and commits it."""

    try:
        version, memory, row, resume = _prepare_continuation(conversation, pause, version, window)
    except (ContinuationNotStarted, *DATABASE_UNAVAILABLE):
        raise
    except Exception as exc:
        logger.exception("continuation of pause %s could not be prepared", pause.id)
        raise ContinuationNotStarted(failure_text(exc)) from exc
    document = version.document
    turn = turn_context(conversation, document, continuing=pause)

    def run_and_commit() -> Committed:
        outcome: LifecycleOutcome | Exception = Completed()
        if isinstance(resume, ConfigDrift):
            outcome = record_failure(memory, turn, resume)
        elif resume is not None:
            outcome = run_pipeline(document, memory, turn, resume=resume)
        # A pause met later in the same turn was still raised by the user whose turn it is, not its decider.
        return commit_turn(
            conversation, document, memory, outcome, row=row, resolving=pause, raised_by_id=pause.raised_by_id
        )

    return memory, row, run_and_commit


def _prepare_continuation(
    conversation: Conversation,
    pause: Pause,
    version: AgentVersion | None = None,
    window: list[ConversationStep] | None = None,
) -> tuple[AgentVersion, ConversationMemory, ConversationStep, ResumePoint | ConfigDrift | None]:
    """The agent version (``version``: as the decision just checked it; else read), the paused turn's
    memory with the decision applied, its step row, and where the pipeline resumes (None: it does not
    run again, a rejected rule pause only posts the rejection; ConfigDrift: the paused workflow is gone,
    the turn fails)."""

    if version is None:
        version = deployed_version_of(conversation)
    if version is None:
        raise ContinuationNotStarted("agent version no longer deployed")
    try:
        memory, row = memory_for_paused_turn(conversation, caller=continuation_caller(pause), window=window)
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
