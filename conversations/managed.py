"""Managed conversations: one conversation per intent and user, kept by the server (EDDI's managed agents).

An agent trigger names, for an intent, the agent deployments a conversation for it starts with. The
first request of a user for an intent starts a conversation with one of them (at random when there are
several, as EDDI picks) and maps the pair to it; every later request acts on that conversation until it
has ended (or was deleted), when the next request starts a new one and maps the pair to it instead. A
conversation awaiting approval stays mapped: a say to it is refused (409) like any say while paused.

Starting is serialized per (intent, user) by a PostgreSQL session advisory lock held while the start
turn runs outside any transaction: of two first requests at once, the second waits, reads the mapping
the first wrote and acts on that conversation, so one conversation is started, not two. An ended one is
replaced the same way. The unique (intent, user) constraint and the mapping's row lock are the backstop
where no advisory lock is taken (SQLite): a mapping to a live conversation written meanwhile wins.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connection, transaction

from approvals.actors import Actor
from common.errors import Conflict, Forbidden, NotFound
from conversations import turns, undo_redo
from conversations.agents import OnVersion
from conversations.cancels import CancelResult
from conversations.models import (
    AgentTrigger,
    Conversation,
    ConversationState,
    ConversationStep,
    ManagedConversation,
)
from conversations.selectors import conversation_for_talk, talk_on_version
from conversations.turn_commits import TALKABLE, TurnResult

MANAGED_LOCK_SPACE = 0x4D474344  # "MGCD": the advisory locks of (intent, user) pairs starting a conversation


def require_own_user_id(user: Any, user_id: str) -> None:
    """The ``{userId}`` of a managed path must be the caller's own user name, for every caller, admins
    included: a managed conversation is always the caller's own, and the actor comes from the
    authenticated identity, never from the path. Checked before anything is read or written."""
    if user_id != user.get_username():
        raise Forbidden(
            f"The userId in the path must be your own user name ('{user.get_username()}'): a managed "
            "conversation is always the caller's own"
        )


# --- agent triggers -------------------------------------------------------------------------------------


def trigger_list() -> list[AgentTrigger]:
    return list(AgentTrigger.objects.order_by("intent"))


def trigger_for(*, intent: str) -> AgentTrigger:
    trigger = AgentTrigger.objects.filter(intent=intent).first()
    if trigger is None:
        raise NotFound(f"No agent trigger for the intent '{intent}'", intent=intent)
    return trigger


def trigger_create(*, intent: str, agent_deployments: list[dict[str, Any]]) -> AgentTrigger:
    try:
        with transaction.atomic():
            return AgentTrigger.objects.create(intent=intent, agent_deployments=agent_deployments)
    except IntegrityError:
        raise Conflict(f"An agent trigger for the intent '{intent}' already exists", intent=intent) from None


def trigger_replace(*, intent: str, agent_deployments: list[dict[str, Any]]) -> AgentTrigger:
    """Replace the deployments of an existing trigger (404 when there is none). Conversations already
    started keep their agent: the trigger is read only when one starts."""
    with transaction.atomic():
        trigger = AgentTrigger.objects.select_for_update().filter(intent=intent).first()
        if trigger is None:
            raise NotFound(f"No agent trigger for the intent '{intent}'", intent=intent)
        trigger.agent_deployments = agent_deployments
        trigger.save(update_fields=["agent_deployments", "updated_at"])
    return trigger


def trigger_delete(*, intent: str) -> None:
    """Delete the trigger if there is one (nothing to delete is no error, as in EDDI). Mapped
    conversations stay mapped; only a new start needs the trigger."""
    AgentTrigger.objects.filter(intent=intent).delete()


def start_context(deployment: dict[str, Any]) -> dict[str, Any]:
    """A deployment's ``initialContext`` as the start's ``context``: EDDI's ``{"type", "value"}`` entries
    become their plain values (a string, an object, an expressions string), as a start body's
    ``context`` holds them."""
    return {name: entry["value"] for name, entry in (deployment.get("initialContext") or {}).items()}


# --- the managed conversation ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Current:
    """The conversation a managed request acts on; ``started`` when this request started it."""

    conversation: Conversation
    started: TurnResult | None = None

    @property
    def steps(self) -> list[dict[str, Any]] | None:
        return self.started.steps if self.started is not None else None


def current_conversation(
    *, user: Any, intent: str, before_start: Callable[[], None] | None = None
) -> Current:
    """The caller's conversation for ``intent``: the mapped one unless it has ended or was deleted, else
    a new one started with a deployment of the intent's trigger (404 naming the intent when there is no
    trigger; what the start refuses, it refuses: 409 ``NOT_DEPLOYED``, ``LIMIT_REACHED``).
    ``before_start`` runs only when a conversation is about to start (the turn rate of a read)."""
    live = _live_mapped(user, intent)
    if live is not None:
        return Current(live)
    trigger = trigger_for(intent=intent)
    with _starting(intent, user):
        live = _live_mapped(user, intent)  # a request that held the lock before us may have started one
        if live is not None:
            return Current(live)
        if before_start is not None:
            before_start()
        deployment = secrets.choice(trigger.agent_deployments)
        started = turns.start_conversation(
            user=user,
            agent_id=deployment["agentId"],
            environment=deployment["environment"],
            context=start_context(deployment),
        )
        return _mapped_to(user, intent, started)


def say_to_intent(*, user: Any, intent: str, user_input: str, context: dict[str, Any] | None) -> TurnResult:
    """Say to the caller's conversation for ``intent`` (started first when there is none): refused (409,
    nothing consumed) while it awaits approval or runs a turn, and it stays mapped meanwhile."""
    current = current_conversation(user=user, intent=intent)
    talk: OnVersion = talk_on_version(user, current.conversation.pk)
    return turns.say(conversation=talk, user=user, user_input=user_input, context=context)


def end_for_intent(*, user: Any, intent: str, actor: Actor) -> CancelResult | None:
    """End the caller's conversation for ``intent``; None when there is none (nothing to end is no error,
    as in EDDI). The mapping stays: the next request finds it ended and starts a new one."""
    conversation = _mapped(user, intent)
    if conversation is None:
        return None
    return turns.end_conversation(conversation=conversation_for_talk(user, conversation.pk), actor=actor)


def undo_for_intent(*, user: Any, intent: str) -> Conversation:
    return undo_redo.undo(conversation=_required_mapped(user, intent))


def redo_for_intent(*, user: Any, intent: str) -> Conversation:
    return undo_redo.redo(conversation=_required_mapped(user, intent))


def undo_available(*, user: Any, intent: str) -> bool:
    """Whether an undo would succeed now: the caller has a conversation for ``intent`` that takes input
    and has a live step."""
    conversation = _mapped(user, intent)
    return conversation is not None and conversation.state in TALKABLE and conversation.step_count > 0


def redo_available(*, user: Any, intent: str) -> bool:
    """Whether a redo would succeed now: the caller has a conversation for ``intent`` that takes input
    and has an undone step right after its live ones."""
    conversation = _mapped(user, intent)
    return (
        conversation is not None
        and conversation.state in TALKABLE
        and ConversationStep.objects.filter(
            conversation=conversation, undone=True, index=conversation.step_count
        ).exists()
    )


def _mapped(user: Any, intent: str) -> Conversation | None:
    mapping = (
        ManagedConversation.objects.select_related("conversation").filter(intent=intent, user=user).first()
    )
    return mapping.conversation if mapping is not None else None


def _required_mapped(user: Any, intent: str) -> Conversation:
    conversation = _mapped(user, intent)
    if conversation is None:
        raise NotFound(f"You have no managed conversation for the intent '{intent}'", intent=intent)
    return conversation_for_talk(user, conversation.pk)


def _live_mapped(user: Any, intent: str) -> Conversation | None:
    """The mapped conversation unless it has ended (or was deleted): the one a request acts on."""
    conversation = _mapped(user, intent)
    if conversation is None or conversation.state == ConversationState.ENDED:
        return None
    return conversation


def _mapped_to(user: Any, intent: str, started: TurnResult) -> Current:
    """Map (intent, user) to the conversation just started, under the mapping's row lock. A mapping to a
    live conversation written meanwhile wins and the request acts on that one (only possible where the
    advisory lock is not taken: the unique constraint is the backstop)."""
    conversation = started.conversation
    with transaction.atomic():
        mapping, created = ManagedConversation.objects.select_for_update().get_or_create(
            intent=intent, user=user, defaults={"conversation": conversation}
        )
        if created:
            return Current(conversation, started)
        # read after the lock, on its own: a join read with the lock would keep the row it saw first
        mapped = Conversation.objects.filter(pk=mapping.conversation_id).first()
        if mapped is not None and mapped.state != ConversationState.ENDED:
            return Current(mapped)
        mapping.conversation = conversation
        mapping.save(update_fields=["conversation", "updated_at"])
    return Current(conversation, started)


@contextmanager
def _starting(intent: str, user: Any) -> Iterator[None]:
    """Hold the (intent, user) pair while a conversation for it starts: a PostgreSQL session advisory lock,
    waited for, released when the start is done or failed (and by the server if the connection dies)."""
    if connection.vendor != "postgresql":
        yield
        return
    key = _lock_key(intent, user.pk)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", [MANAGED_LOCK_SPACE, key])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [MANAGED_LOCK_SPACE, key])


def _lock_key(intent: str, user_pk: Any) -> int:
    """A signed 32-bit key for the pair (two pairs sharing one only wait for each other)."""
    digest = hashlib.blake2b(f"{intent}\x1f{user_pk}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)
