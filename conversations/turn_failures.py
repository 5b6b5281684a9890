"""A failed turn never locks a conversation.

Whatever a turn raises - in a task, or while its result is stored (PostgreSQL refusing a value, which
also aborts the transaction that tried) - the conversation leaves IN_PROGRESS in the same request: it
becomes ERROR, which takes input again, and the error is recorded on the turn's step as the exception
type and a short, redacted text. A continuation's pause is finished as failed. The record is written in
a transaction of its own, from values that are known to be storable, never from the turn's memory.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, transaction

from approvals.decisions import finish_pause
from approvals.models import Pause
from conversations.models import Conversation, ConversationState, ConversationStep
from conversations.pipeline.conversation_memory import Step
from conversations.step_store import save_step
from toolgate.outbound import redact

logger = logging.getLogger(__name__)

S = ConversationState
T = TypeVar("T")
# The database's own failure (unreachable, or its answer lost after a commit), not the turn's: raised as
# it is, never recorded as a failed turn. The API answers 503 and the client re-reads; a turn that had
# committed its claim is left to its lease, as after a crash (recovery interrupts it, or restores the
# decided pause it continued).
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
ERROR_TEXT_MAX = 300
# What PostgreSQL cannot store in text or jsonb: NUL, and UTF-16 surrogates that pair with nothing.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """``text`` with every character PostgreSQL refuses replaced by U+FFFD."""
    return _UNSTORABLE.sub("\ufffd", text)


def failure_text(exc: BaseException) -> str:
    """The exception type and the first line of its message, redacted and short: safe to store and show."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = redact(storable_text(message))
    if len(text) > ERROR_TEXT_MAX:
        text = text[: ERROR_TEXT_MAX - 1] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def fail_turn(
    conversation: Conversation,
    *,
    user_input: str,
    error: BaseException,
    row: ConversationStep | None = None,
    resolving: Pause | None = None,
) -> str:
    """Record a turn that raised; returns the conversation's state (ERROR unless a cancel or end won).

    A new turn gets a step of its own (its input, made storable, and the error); a continued turn adds
    the error to the step as it was stored before the turn. If even that cannot be written, the
    conversation is still moved to ERROR; only when the database refuses that too does the error
    propagate (and the stale-turn sweep is the backstop).
    """
    text = failure_text(error)
    logger.error("turn of conversation %s failed: %s", conversation.pk, text, exc_info=error)
    try:
        with transaction.atomic():
            return _record(conversation, user_input=user_input, text=text, row=row, resolving=resolving)
    except Exception:
        logger.exception("could not record the failed turn of conversation %s", conversation.pk)
    with transaction.atomic():
        if Conversation.objects.filter(pk=conversation.pk, state=S.IN_PROGRESS).update(state=S.ERROR):
            if resolving is not None:
                finish_pause(pause=resolving, outcome="failed", detail={"error": text})
            return S.ERROR
    return Conversation.objects.filter(pk=conversation.pk).values_list("state", flat=True).first() or S.ENDED


def _record(
    conversation: Conversation,
    *,
    user_input: str,
    text: str,
    row: ConversationStep | None,
    resolving: Pause | None,
) -> str:
    current = (
        Conversation.objects.select_for_update()
        .filter(pk=conversation.pk)
        .values("state", "properties")
        .first()
    )
    if current is None or current["state"] != S.IN_PROGRESS:
        if resolving is not None:
            finish_pause(pause=resolving, outcome="discarded", detail={"state": current and current["state"]})
        return current["state"] if current else S.ENDED
    Conversation.objects.filter(pk=conversation.pk).update(state=S.ERROR)
    if row is not None:
        stored = ConversationStep.objects.get(pk=row.pk)
        stored.data = {**stored.data, "error": text}
        stored.save(update_fields=["data"])
    else:
        save_step(
            conversation, Step(input=storable_text(user_input), data={"error": text}), current["properties"]
        )
    if resolving is not None:
        finish_pause(pause=resolving, outcome="failed", detail={"error": text})
    return S.ERROR


def run_guarded(
    conversation: Conversation,
    turn: Callable[[], T],
    *,
    user_input: str,
    row: ConversationStep | None = None,
    resolving: Pause | None = None,
) -> T | str:
    """Run ``turn()`` (which runs and commits a turn) and return what it returns; if it raises, fail the
    turn and return the conversation's state."""
    try:
        return turn()
    except DATABASE_UNAVAILABLE:
        raise
    except Exception as exc:
        return fail_turn(conversation, user_input=user_input, error=exc, row=row, resolving=resolving)
