"""What every turn of a conversation shares: running the pipeline, committing its result, its lease.

A turn's result is written only while the conversation is still the turn's (IN_PROGRESS, no cancel
recorded): the step, the new state and, when it paused, the Pause with what belongs to it, in one
transaction (``commit_turn``). A turn answers with what it committed (``TurnResult``), so the snapshot
need not be read back. Starting and saying: conversations.turns; continuing after a decision:
conversations.turn_continuation; undo and redo: conversations.undo_redo.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db import transaction

from approvals.decisions import Finishing, finish_pause, finishing
from approvals.leases import kept_alive
from approvals.models import Engine, Pause, PauseKind, SubjectType
from approvals.pauses import open_pause, rule_pause_reason
from approvals.routing import effective_routing
from approvals.self_approval import effective_allow_self_approval
from common import rows
from common.errors import WrongState
from conversations.agents import deployed_version
from conversations.cancels import finish_cancelled_turn
from conversations.lifecycle import Cancelled, Completed, LifecycleOutcome, Paused, Stopped, run_lifecycle
from conversations.models import AgentVersion, Conversation, ConversationState, ConversationStep
from conversations.pipeline.conversation_memory import ConversationMemory
from conversations.pipeline.pausing import PauseRequest, ResumePoint
from conversations.pipeline.registry import TurnContext
from conversations.snapshots import snapshot_steps_in
from conversations.step_store import (
    HeldTurn,
    commit_turn_and_step,
    commit_turn_state,
    insert_with_first_step,
    save_step,
)
from conversations.turn_failures import DATABASE_UNAVAILABLE, failure_text
from toolgate.gate import store_batch
from toolgate.runtime import act_on_trip, record_trip

logger = logging.getLogger(__name__)

S = ConversationState
TALKABLE = (S.READY, S.ERROR, S.EXECUTION_INTERRUPTED)
AWAITING_MESSAGE = (
    "Conversation is awaiting human approval (current state: AWAITING_HUMAN) - a reviewer must resolve "
    "it via POST /agents/{id}/resume (or cancel) before new input is accepted"
)


def busy_refusal(conversation_id: Any, state: str | None) -> WrongState:
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


def turn_kept_alive(conversation: Conversation) -> AbstractContextManager[None]:
    """The turn's lease is renewed while it runs; if this process dies, recovery interrupts it in seconds."""
    return kept_alive(lambda until: renew_turn(conversation.pk, until), what=f"turn of {conversation.pk}")


def deployed_version_of(conversation: Conversation) -> AgentVersion | None:
    return deployed_version(
        agent_id=conversation.agent_id,
        version=conversation.agent_version,
        environment=conversation.environment,
    )


def run_pipeline(
    document: dict[str, Any], memory: ConversationMemory, turn: TurnContext, resume: ResumePoint | None = None
) -> LifecycleOutcome | Exception:
    try:
        return run_lifecycle(document, memory, turn, resume=resume)
    except DATABASE_UNAVAILABLE:
        raise
    except Exception as exc:
        return record_failure(memory, turn, exc)


def record_failure(memory: ConversationMemory, turn: TurnContext, exc: Exception) -> Exception:
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


def turn_result(conversation: Conversation, committed: Committed | str) -> TurnResult:
    """The conversation as the turn committed it, without reading it back when the turn's own result won."""
    if not isinstance(committed, Committed) or committed.memory is None:
        conversation.refresh_from_db()
        return TurnResult(conversation)
    conversation.state = committed.state
    conversation.properties = committed.memory.properties
    conversation.cancel_requested_at, conversation.cancel_requested_by = None, ""
    return TurnResult(conversation, snapshot_steps_in(committed.memory))


def commit_turn(
    conversation: Conversation,
    document: dict[str, Any],
    memory: ConversationMemory,
    outcome: LifecycleOutcome | Exception,
    *,
    row: ConversationStep | None = None,
    resolving: Pause | None = None,
    raised_by_id: int | None = None,
    first_turn: bool = False,
    held: HeldTurn | None = None,
    unsaved: bool = False,
) -> Committed:
    """Write the turn's result if the conversation is still ours (IN_PROGRESS, no cancel recorded).
    A turn that was cancelled ends through finish_cancelled_turn.

    ``raised_by_id`` is the user whose turn this is; a pause it opens records them (separation of duties).
    ``held``: the turn holds the conversation's row since ``hold_for_turn``. ``unsaved``: a first turn in
    the transaction that creates the conversation, whose row is not written yet: it is inserted as the
    turn left it (one write, not an insert and then an update).
    """
    if unsaved and isinstance(outcome, Cancelled):  # the cancel path updates the row: it must exist
        rows.insert(conversation)
        unsaved = False
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
    # a rule's pause marks the step it stops at; the memory takes the marks once the commit won
    marks = (
        {"hitl:status": "awaiting_approval"}
        if isinstance(outcome, Paused) and outcome.request.kind == PauseKind.RULE
        else {}
    )
    stored = replace(
        memory.current, data={**memory.current.data, **marks}, outputs={**memory.current.outputs, **marks}
    )
    no_tail = first_turn or (held is not None and not held.undone_tail)
    # a first turn that opens no pause is one statement (the row and its step): no transaction of its own
    alone = unsaved and not isinstance(outcome, Paused)
    with (
        nullcontext() if alone else transaction.atomic(savepoint=False)
    ):  # inside a one-transaction turn: fails it whole
        # the step is written with the conversation's row (a new one only when no undone tail is left)
        with_step = row is not None or no_tail
        ending: Finishing | None = None  # the continued pause's end, when it is part of the statement
        written: tuple[ConversationStep, int, tuple[Any, ...] | None] | None = None
        if unsaved:
            conversation.state, conversation.properties = state, memory.properties
            insert_with_first_step(conversation, stored, memory.properties)
            won: int | None = conversation.step_count
        elif with_step:
            # the pause it continued finishes (RESOLVING -> RESOLVED) in the same statement
            ending = finishing(resolving) if resolving is not None else None
            written = commit_turn_and_step(
                conversation,
                stored,
                running=S.IN_PROGRESS,
                state=state,
                properties=memory.properties,
                row=row,
                held=held,
                then=(ending.sql, ending.params) if ending is not None else None,
                then_returns=ending.probes if ending is not None else (),
            )
            won = None if written is None else conversation.step_count
        else:
            won = commit_turn_state(
                conversation,
                running=S.IN_PROGRESS,
                state=state,
                properties=memory.properties,
                appends_step=row is None,
                held=held,
            )
        if won is None:  # a cancel landed during the last task, or the conversation was ended or interrupted
            return Committed(
                finish_cancelled_turn(conversation, memory, row=row, resolving=resolving, stopped_before=None)
            )
        memory.current.data.update(marks)
        memory.current.outputs.update(marks)
        if resolving is not None:
            finish_pause(
                pause=resolving,
                outcome="failed" if state == S.ERROR else "completed",
                detail={"error": memory.current.data.get("error")} if state == S.ERROR else None,
                finished=(ending, bool(written[1]), written[2]) if ending is not None and written else None,
            )
        if not (unsaved or with_step):
            save_step(
                conversation,
                memory.current,
                memory.properties,
                row=row,
                counted=True,
                drop_undone=not no_tail,
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
        surface=Engine.REGULAR,
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
        routing=effective_routing(hitl_config, request.matched_rules),
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
