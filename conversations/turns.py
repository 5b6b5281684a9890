"""Conversation services: start and say (end and cancel: conversations.cancels).

A turn of an agent whose tasks are all local runs in one transaction (conversations.local_turns):
the hold (the conversation's row locked, and the window read, in one statement), the pipeline and the
commit, which is the conversation's only write, with its step in the same statement (a start inserts
the row as its first turn left it, with that turn's step, needing no transaction of its own unless the
turn paused).
Any other turn may be slow (its http calls, its model), so it runs outside a transaction: it first
commits the move to IN_PROGRESS with a compare-and-set, runs the pipeline under a lease, then commits
the step, the new state and, when it paused, the Pause, in one transaction guarded by IN_PROGRESS and
by no cancel having been recorded.
A cancel recorded meanwhile stops the turn before its next task (conversations.cancels); anything
the turn raises leaves the conversation ERROR in the same request (conversations.turn_failures).
The commit every turn shares is conversations.turn_commits; continuing after a decision,
conversations.turn_continuation; undo and redo, conversations.undo_redo.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals.leases import lease_expiry
from approvals.models import Pause
from approvals.pause_caps import require_room_for_a_pause
from common import rows
from common.errors import WrongState
from conversations import nested_agents
from conversations.acting_identity import approver_caller
from conversations.agents import OnVersion, newest_deployed_version, newest_deployed_version_and_open_pauses
from conversations.cancels import cancel_check, cancel_conversation, end_conversation
from conversations.errors import NotDeployed
from conversations.local_turns import runs_in_one_transaction
from conversations.models import AgentVersion, Conversation
from conversations.pipeline.conversation_memory import CONVERSATION_START
from conversations.pipeline.registry import TurnContext
from conversations.step_store import HeldTurn, caller_for, claim_turn, hold_for_turn, memory_for_new_turn
from conversations.turn_commits import (
    TALKABLE,
    Committed,
    S,
    TurnResult,
    busy_refusal,
    commit_turn,
    deployed_version_of,
    run_pipeline,
    turn_kept_alive,
    turn_result,
)
from conversations.turn_failures import DATABASE_UNAVAILABLE, fail_turn, run_guarded
from toolgate.runtime import Continuing


def turn_context(
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


def start_conversation(
    *,
    user: Any,
    agent_id: Any,
    environment: str,
    context: dict[str, Any] | None = None,
    check_pause_caps: bool = True,
    version: AgentVersion | None = None,
) -> TurnResult:
    """Start on the newest version deployed in ``environment``; the conversation stays on it. ``version``:
    that version, when the caller just read it (``newest_deployed_version``) in its own transaction.

    Refused (409 LIMIT_REACHED) with nothing created while the user or the agent is at its cap of pending
    pauses (approvals.pause_caps); ``check_pause_caps=False`` only for a group member's turn, whose pause
    never stays open. An agent whose tasks are all local starts in one transaction
    (conversations.local_turns): the conversation and its first step commit together, or neither does."""
    open_pauses = None
    if version is None and check_pause_caps:
        version, open_pauses = newest_deployed_version_and_open_pauses(
            agent_id=agent_id, environment=environment, owner_id=user.pk
        )
    elif version is None:
        version = newest_deployed_version(agent_id=agent_id, environment=environment)
    if check_pause_caps:
        require_room_for_a_pause(owner_id=user.pk, agent_id=version.agent_id, counted=open_pauses)

    def created(*, written: bool = True) -> Conversation:
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
        if written:
            rows.insert(conversation)
        return conversation

    def turn(conversation: Conversation, *, unsaved: bool = False) -> Committed:
        memory = memory_for_new_turn(
            conversation, user_input="", context=context or {}, caller=caller_for(user), first_turn=True
        )
        memory.current.actions.append(CONVERSATION_START)
        outcome = run_pipeline(version.document, memory, turn_context(conversation, version.document))
        return commit_turn(
            conversation,
            version.document,
            memory,
            outcome,
            raised_by_id=user.pk,
            first_turn=True,
            unsaved=unsaved,
        )

    if runs_in_one_transaction(version.document):
        try:
            # nothing is written before the turn's commit, which inserts the row as the turn left it (in
            # one statement with its step, or in one transaction with a pause it opened); inside a
            # caller's transaction, in a savepoint, so that a failed statement aborts only the start
            nested = transaction.get_connection().in_atomic_block
            with transaction.atomic() if nested else nullcontext():
                conversation = created(written=False)
                committed = turn(conversation, unsaved=True)
        except DATABASE_UNAVAILABLE:
            raise  # nothing of it landed, or all of it did: either way not a failed first turn
        except Exception as exc:  # nothing of it landed: start it again, to record the failed first turn
            with transaction.atomic():
                conversation = created()
                return turn_result(conversation, fail_turn(conversation, user_input="", error=exc))
        return turn_result(conversation, committed)
    conversation = created()
    with turn_kept_alive(conversation):
        outcome = run_guarded(conversation, lambda: turn(conversation), user_input="")
    return turn_result(conversation, outcome)


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
    open_pauses = None
    if isinstance(conversation, OnVersion):
        conversation, version, open_pauses = (
            conversation.conversation,
            _version_for_turn(conversation.conversation, conversation.version),
            conversation.open_pauses,
        )
    else:
        version = _version_for_turn(conversation, deployed_version_of(conversation))
    if check_pause_caps and conversation.state in TALKABLE:  # a busy one is refused for being busy
        require_room_for_a_pause(
            owner_id=conversation.owner_id,
            agent_id=conversation.agent_id,
            for_other=conversation.owner_id != user.pk,
            counted=open_pauses,
        )

    def claimed() -> bool:
        return claim_turn(
            conversation,
            running=S.IN_PROGRESS,
            talkable=TALKABLE,
            started=timezone.now(),
            alive_until=lease_expiry(),
        )

    def turn(held: HeldTurn | None = None) -> Committed:
        memory = memory_for_new_turn(
            conversation,
            user_input=user_input,
            context=context or {},
            caller=caller_for(user),
            window=held.window if held is not None else None,
        )
        outcome = run_pipeline(version.document, memory, turn_context(conversation, version.document))
        return commit_turn(conversation, version.document, memory, outcome, raised_by_id=user.pk, held=held)

    if runs_in_one_transaction(version.document):
        try:
            with transaction.atomic():
                held = hold_for_turn(
                    conversation,
                    running=S.IN_PROGRESS,
                    talkable=TALKABLE,
                    started=timezone.now(),
                    alive_until=lease_expiry(),
                )
                if held is None:
                    raise busy_refusal(conversation.pk, _state_of(conversation))
                committed = turn(held)
        except (WrongState, *DATABASE_UNAVAILABLE):
            raise
        except Exception as exc:  # the turn's transaction rolled back: claim again, to record the failure
            with transaction.atomic():
                if not claimed():
                    raise busy_refusal(conversation.pk, _state_of(conversation)) from exc
                return turn_result(conversation, fail_turn(conversation, user_input=user_input, error=exc))
        return turn_result(conversation, committed)
    if not claimed():
        raise busy_refusal(conversation.pk, _state_of(conversation))
    with turn_kept_alive(conversation):
        outcome = run_guarded(conversation, turn, user_input=user_input)
    return turn_result(conversation, outcome)


def _state_of(conversation: Conversation) -> str | None:
    return Conversation.objects.filter(pk=conversation.pk).values_list("state", flat=True).first()


def _version_for_turn(conversation: Conversation, version: AgentVersion | None) -> AgentVersion:
    """The deployed version a new turn runs on (None: not deployed), read before the turn claims the
    conversation: a conversation that could not take input anyway says so (409) before the agent is
    found undeployed."""
    if version is None:
        state = _state_of(conversation)
        if state not in TALKABLE:
            raise busy_refusal(conversation.pk, state)
        raise NotDeployed(
            f"Agent {conversation.agent_id} version {conversation.agent_version} is not deployed in "
            f"{conversation.environment}"
        )
    return version


__all__ = [
    "start_conversation",
    "say",
    "end_conversation",
    "cancel_conversation",
    "TurnResult",
]
