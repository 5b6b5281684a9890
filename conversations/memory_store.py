"""Loading a conversation's memory from its step rows, and writing a turn's step back."""

from __future__ import annotations

from typing import Any

from django.db.models import Max
from rest_framework.authtoken.models import Token

from conversations.models import Conversation, ConversationStep
from conversations.pipeline.memory import Caller, ConversationMemory, Step


def step_from_row(row: ConversationStep) -> Step:
    return Step(
        input=row.input,
        context=row.context,
        actions=list(row.actions),
        output=list(row.output),
        outputs=dict(row.outputs),
        data=dict(row.data),
        quick_replies=list(row.quick_replies),
    )


def caller_for(user: Any) -> Caller | None:
    if user is None:
        return None
    token = Token.objects.filter(user=user).values_list("key", flat=True).first() or ""
    return Caller(username=user.get_username(), token=token)


def live_steps(conversation: Conversation) -> list[ConversationStep]:
    return list(ConversationStep.objects.filter(conversation=conversation, undone=False).order_by("index"))


def memory_for_new_turn(
    conversation: Conversation, *, user_input: str, context: dict[str, Any], caller: Caller | None
) -> ConversationMemory:
    previous = [step_from_row(row) for row in live_steps(conversation)]
    return ConversationMemory(
        conversation_id=str(conversation.id),
        current=Step(input=user_input, context=context),
        previous=previous,
        properties=dict(conversation.properties),
        caller=caller,
    )


def memory_for_paused_turn(
    conversation: Conversation, *, caller: Caller | None
) -> tuple[ConversationMemory, ConversationStep]:
    rows = live_steps(conversation)
    if not rows:
        raise LookupError("the paused conversation has no step to continue")
    memory = ConversationMemory(
        conversation_id=str(conversation.id),
        current=step_from_row(rows[-1]),
        previous=[step_from_row(row) for row in rows[:-1]],
        properties=dict(conversation.properties),
        caller=caller,
    )
    return memory, rows[-1]


def save_step(conversation: Conversation, step: Step, properties: dict[str, Any],
              row: ConversationStep | None = None) -> ConversationStep:
    """Update the continued step's row, or append a new step (dropping redo history)."""
    fields = {
        "input": step.input,
        "context": step.context,
        "actions": step.actions,
        "output": step.output,
        "outputs": step.outputs,
        "data": step.data,
        "quick_replies": step.quick_replies,
        "properties": properties,
    }
    if row is not None:
        for name, value in fields.items():
            setattr(row, name, value)
        row.save(update_fields=list(fields))
        return row
    ConversationStep.objects.filter(conversation=conversation, undone=True).delete()
    last = ConversationStep.objects.filter(conversation=conversation).aggregate(m=Max("index"))["m"]
    return ConversationStep.objects.create(
        conversation=conversation, index=0 if last is None else last + 1, **fields
    )
