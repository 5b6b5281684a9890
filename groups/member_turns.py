"""One member's turn in a discussion, through the 1:1 engine.

A member talks through a conversation of its own, owned by the discussion's owner, on the member
agent's newest production version. EDDI's v1 limits are kept: a member's own
PAUSE_CONVERSATION is not supported inside a discussion (its pause is cancelled as ``system:group`` and
the turn is SKIPPED), and a member's gated tool call is rejected as ``system:group`` (``inGroupTurns:
REJECT``) so the member answers without the tool; if that answer pauses again or fails, the turn is
SKIPPED and the member's pause cancelled. Every such decision goes through the audited core.

A turn first reads the member's ``Seat`` (its conversation and the version it runs on, in one statement),
which tells whether the turn is quick enough to run inside the discussion's transaction (groups.discussions).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from approvals import metrics
from approvals.actors import system_actor
from approvals.continuation_runs import decide_and_continue
from approvals.decision_input import DecisionInput
from approvals.decisions import open_pause_of
from approvals.models import Engine, PauseKind, SubjectType, Verdict
from common.errors import ApplicationError
from conversations import turns
from conversations.agents import OnVersion, conversation_and_its_version, newest_deployed_version
from conversations.cancels import cancel_conversation
from conversations.local_turns import runs_in_one_transaction
from conversations.models import AgentVersion, Conversation, ConversationState
from conversations.selectors import reread_conversation
from conversations.snapshots import snapshot

logger = logging.getLogger(__name__)

ENVIRONMENT = "production"
GROUP_ACTOR = system_actor("group")
OK, SKIPPED, ERROR = "OK", "SKIPPED", "ERROR"
MEMBER_PAUSE_NOTE = (
    "member agent requested human approval (PAUSE_CONVERSATION) — not supported inside group discussions; "
    "configure group-level HITL via requiresApproval instead"
)
TOOL_REJECTED_NOTE = "tool approval is not available during group discussions in this version"
TOOL_FALLBACK_NOTE = (
    "member agent's gated tool call was rejected (tool approval is not available inside group discussions) "
    "and its answer without the tool did not complete"
)


@dataclass(frozen=True)
class Answer:
    status: str
    content: str = ""
    note: str = ""
    tool_rejected: bool = False
    skipped_pause: bool = False


@dataclass(frozen=True)
class Seat:
    """A member as its next turn finds it, read in one statement: its conversation with the deployed version
    that turn runs on, or on its first turn the newest version deployed (``talks``: None), or why the turn
    cannot start (``refused``)."""

    agent_id: str
    talks: OnVersion | None = None
    newest: AgentVersion | None = None
    refused: str = ""

    @property
    def in_one_transaction(self) -> bool:
        """Whether the member's turn is quick enough for the discussion's transaction: every task of its agent
        local (conversations.local_turns). A turn refused before it starts writes nothing either way."""
        version = self.talks.version if self.talks is not None else self.newest
        return version is None or runs_in_one_transaction(version.document)


def seat_of(*, conversations: dict[str, str], agent_id: str) -> Seat:
    """Read what the member's next turn needs (``conversations``: {agentId: conversationId})."""
    known = conversations.get(agent_id)
    if known is not None:
        return Seat(agent_id, talks=conversation_and_its_version(known))
    try:
        return Seat(agent_id, newest=newest_deployed_version(agent_id=agent_id, environment=ENVIRONMENT))
    except ApplicationError as exc:
        return Seat(agent_id, refused=exc.detail)


def _talk(*, owner: Any, seat: Seat, prompt: str) -> turns.TurnResult:
    """The member's turn in its own conversation, started (as the discussion's owner) on its first turn."""
    # Not checked against the caps of pending pauses: the discussion's start was, and a member's own pause
    # never stays open (it is cancelled or its calls rejected at once, below).
    talks = seat.talks
    if talks is None:
        started = turns.start_conversation(
            user=owner,
            agent_id=seat.agent_id,
            environment=ENVIRONMENT,
            check_pause_caps=False,
            version=seat.newest,
        )
        if started.conversation.state == ConversationState.AWAITING_HUMAN:
            return started
        # the conversation started on the version the seat read: no need to read it again
        talks = OnVersion(started.conversation, seat.newest)
    return turns.say(
        conversation=talks,
        user=owner,
        user_input=prompt,
        context={},
        check_pause_caps=False,
    )


def _answer_of(result: turns.TurnResult) -> str:
    output = snapshot(result.conversation, steps=result.steps)["output"]
    return "\n".join(str(text) for text in output)


def _skip(conversation: Conversation, note: str, *, tool_rejected: bool = False) -> Answer:
    """Cancel the member's open pause as system:group (audited) and skip its turn."""
    try:
        cancel_conversation(
            conversation=reread_conversation(conversation_id=conversation.pk), actor=GROUP_ACTOR
        )
    except ApplicationError as exc:  # nothing left to cancel: it ended meanwhile
        logger.info("member conversation %s: nothing to cancel (%s)", conversation.pk, exc.detail)
    metrics.count_member_pause_skipped()
    return Answer(SKIPPED, note=note, tool_rejected=tool_rejected, skipped_pause=True)


def _reject_tool_calls(conversation: Conversation) -> Answer:
    """Reject the member's gated tool calls as system:group and take its answer without them."""
    try:
        decide_and_continue(
            surface=Engine.REGULAR,
            subject_type=SubjectType.CONVERSATION,
            subject_id=conversation.pk,
            decision=DecisionInput(verdict=Verdict.REJECTED, note=TOOL_REJECTED_NOTE),
            actor=GROUP_ACTOR,
        )
    except ApplicationError as exc:
        logger.warning(
            "rejecting the tool calls of member conversation %s failed: %s", conversation.pk, exc.detail
        )
        return _skip(conversation, TOOL_FALLBACK_NOTE, tool_rejected=True)
    after = reread_conversation(conversation_id=conversation.pk)
    if after.state != ConversationState.READY:
        return _skip(after, TOOL_FALLBACK_NOTE, tool_rejected=True)
    return Answer(OK, content=_answer_of(turns.TurnResult(after)), tool_rejected=True)


def member_turn(*, owner: Any, conversations: dict[str, str], seat: Seat, prompt: str) -> Answer:
    """OK with the member's output joined; SKIPPED when the member paused (see the module); ERROR when
    the turn raised or ended in ERROR. ``conversations`` ({agentId: conversationId}) gains the member's
    conversation on its first turn."""
    if seat.refused:
        return Answer(ERROR, note=seat.refused)
    try:
        result = _talk(owner=owner, seat=seat, prompt=prompt)
    except ApplicationError as exc:
        return Answer(ERROR, note=exc.detail)
    conversation = result.conversation
    conversations[seat.agent_id] = str(conversation.id)
    if conversation.state == ConversationState.AWAITING_HUMAN:
        pause = open_pause_of(SubjectType.CONVERSATION, conversation.pk)
        if pause is not None and pause.kind == PauseKind.TOOL_CALL:
            return _reject_tool_calls(conversation)
        return _skip(conversation, MEMBER_PAUSE_NOTE)
    if conversation.state == ConversationState.ERROR:
        return Answer(ERROR, note=f"the member's turn failed (conversation {conversation.id} is in ERROR)")
    return Answer(OK, content=_answer_of(result))
