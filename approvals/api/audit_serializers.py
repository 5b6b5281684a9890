"""The audit ledger as the REST API shows it."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from approvals.models import AuditEntry, SubjectType, Verdict


class AuditEntryOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    sequence = serializers.IntegerField(help_text="Position in the subject's chain, from 1, gap-free.")
    subjectType = serializers.ChoiceField(source="subject_type", choices=SubjectType.choices)
    subjectId = serializers.UUIDField(source="subject_id")
    conversationId = serializers.UUIDField(source="conversation_id", allow_null=True)
    pauseId = serializers.UUIDField(source="pause_id", allow_null=True)
    epoch = serializers.UUIDField(allow_null=True)
    verb = serializers.CharField(help_text="What happened, e.g. hitl.approval or hitl.tool.request_changed.")
    actor = serializers.CharField(help_text="A user name, or system:timeout, slack:U…, mcp:name.")
    automated = serializers.BooleanField()
    verdict = serializers.SerializerMethodField()
    note = serializers.CharField()
    detail = serializers.JSONField()
    createdAt = serializers.DateTimeField(source="created_at")
    prevHash = serializers.CharField(source="prev_hash")
    entryHash = serializers.CharField(source="entry_hash")

    @extend_schema_field(serializers.ChoiceField(choices=Verdict.choices, allow_null=True))
    def get_verdict(self, entry: AuditEntry) -> str | None:
        return entry.verdict or None


class AuditEntryPageSerializer(serializers.Serializer):
    results = AuditEntryOutputSerializer(many=True)
    next = serializers.URLField(allow_null=True, help_text="The next page, or null on the last one.")
