"""What the REST answers say about a pause, shared by every subject's views: its last decision and an
inbox row."""

from __future__ import annotations

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers


class LastDecisionSerializer(serializers.Serializer):
    verdict = serializers.CharField()
    decidedBy = serializers.CharField()
    automated = serializers.BooleanField()
    note = serializers.CharField(allow_null=True)
    decidedAt = serializers.DateTimeField(allow_null=True)
    cancelledBy = serializers.CharField(
        allow_null=True, help_text="who cancelled the pause or its continuation; null when nobody did"
    )
    cancelledAt = serializers.DateTimeField(allow_null=True)


INBOX_ROW = inline_serializer(
    "InboxRow",
    {
        "pauseId": serializers.UUIDField(),
        "surface": serializers.CharField(),
        "conversationId": serializers.UUIDField(),
        "agentId": serializers.UUIDField(allow_null=True),
        "groupId": serializers.UUIDField(allow_null=True),
        "ownerId": serializers.CharField(allow_null=True),
        "userId": serializers.CharField(allow_null=True, help_text="the same as ownerId, under EDDI's name"),
        "pausedAt": serializers.DateTimeField(),
        "deadline": serializers.DateTimeField(allow_null=True),
        "pauseReason": serializers.CharField(),
        "pauseType": serializers.CharField(),
        "timeoutPolicy": serializers.CharField(),
        "approvalTimeout": serializers.CharField(allow_null=True),
        "toolNames": serializers.ListField(child=serializers.CharField()),
        "approvals": serializers.DictField(
            required=False, help_text="a pause that needs several approvals: count, required, by"
        ),
    },
    many=True,
)
