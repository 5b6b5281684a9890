"""What a conversation left in the database, as text a check can search (e.g. for a secret that must not be there)."""

from __future__ import annotations

from django.core import serializers

from approvals.models import AuditEntry, Pause
from conversations.models import ConversationStep
from toolgate.models import JournalEntry, PendingToolBatch, PendingToolCall


def stored_rows_text(conversation_id: str) -> str:
    """Every row a tool pause and its continuation wrote for this conversation, as JSON text."""
    querysets = [
        Pause.objects.filter(subject_id=conversation_id),
        PendingToolBatch.objects.filter(conversation_id=conversation_id),
        PendingToolCall.objects.filter(batch__conversation_id=conversation_id),
        JournalEntry.objects.filter(conversation_id=conversation_id),
        AuditEntry.objects.filter(subject_id=conversation_id),
        ConversationStep.objects.filter(conversation_id=conversation_id),
    ]
    return "\n".join(serializers.serialize("json", queryset) for queryset in querysets)
