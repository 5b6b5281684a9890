"""REST adapters for reading a discussion's approval: its approval status and the group inboxes."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.api.inbox_query import GROUP_INBOX_DEFAULT_LIMIT, inbox_limit
from approvals.api.pause_serializers import INBOX_ROW, LastDecisionSerializer
from groups.api.discussion_views import eddi_discussion_fields
from groups.discussion_status import approval_status_in_detail, pending_group_approvals
from groups.models import DiscussionState
from groups.selectors import discussion_for_owner

PAUSE_DETAILS = inline_serializer(
    "DiscussionPauseDetails",
    {
        "type": serializers.CharField(help_text="PHASE or TASK"),
        "reason": serializers.CharField(),
        "phaseIndex": serializers.IntegerField(),
        "phaseName": serializers.CharField(),
        "phaseType": serializers.CharField(help_text="OPINION, CHALLENGE, SYNTHESIS or EXECUTE"),
        "granularity": serializers.CharField(help_text="the group's hitlConfig.granularity: PHASE or TASK"),
        "awaitingTaskIds": serializers.ListField(child=serializers.CharField()),
        "awaitingTasks": inline_serializer(
            "DiscussionAwaitingTask",
            {
                "id": serializers.CharField(),
                "description": serializers.CharField(),
                "assignee": serializers.UUIDField(),
            },
            many=True,
            help_text="the tasks awaiting approval (their results: detail=full)",
        ),
    },
    allow_null=True,
)
APPROVAL_STATUS = inline_serializer(
    "DiscussionApprovalStatus",
    {
        "discussionId": serializers.UUIDField(),
        "groupId": serializers.UUIDField(),
        "state": serializers.ChoiceField(DiscussionState.choices),
        "pauseId": serializers.UUIDField(allow_null=True, help_text="null unless awaiting approval"),
        "pausedAt": serializers.DateTimeField(allow_null=True),
        "phaseIndex": serializers.IntegerField(allow_null=True, help_text="the phase whose gate paused"),
        "phaseName": serializers.CharField(allow_null=True),
        "pauseType": serializers.CharField(allow_null=True, help_text="PHASE or TASK"),
        "reason": serializers.CharField(allow_null=True),
        "timeoutPolicy": serializers.CharField(allow_null=True),
        "approvalTimeout": serializers.CharField(allow_null=True, help_text="null when waiting indefinitely"),
        "deadline": serializers.DateTimeField(allow_null=True, help_text="null when waiting indefinitely"),
        "awaitingTaskIds": serializers.ListField(
            child=serializers.CharField(), allow_null=True, help_text="a TASK pause's; [] for a PHASE pause"
        ),
        "pauseDetails": PAUSE_DETAILS,
        "lastDecision": LastDecisionSerializer(
            allow_null=True, help_text="the newest pause's decision; null while awaiting approval"
        ),
        "discussion": serializers.DictField(
            required=False, help_text="the discussion with its transcript and tasks; only with detail=full"
        ),
        # EDDI's names of the same values (docs/eddi-compatibility.md)
        "groupConversationId": serializers.UUIDField(help_text="the same as discussionId"),
        "pausedPhaseName": serializers.CharField(allow_null=True, help_text="the same as phaseName"),
        "pauseReason": serializers.CharField(allow_null=True, help_text="the same as reason"),
        "awaitingApprovalTaskIds": serializers.ListField(
            child=serializers.CharField(), allow_null=True, help_text="the same as awaitingTaskIds"
        ),
        # with detail=full: EDDI's group conversation, beside the summary
        **{
            name: f
            for name, f in eddi_discussion_fields(required=False).items()
            if name not in ("pausedAt", "pausedPhaseName")  # the summary's own, the same values
        },
        "transcript": serializers.ListField(
            child=serializers.DictField(), required=False, help_text="with detail=full: as the discussion's"
        ),
    },
)
LIMIT = OpenApiParameter("limit", int, required=False, description="1..1000 (clamped), default 100")


class DiscussionApprovalStatusView(APIView):
    @extend_schema(
        summary="A discussion's pause summary (detail=full adds the discussion; approver-only callers "
        "only while it awaits approval)",
        parameters=[OpenApiParameter("detail", str, enum=["summary", "full"], required=False)],
        responses=APPROVAL_STATUS,
    )
    def get(self, request: Request, group_id: str, discussion_id: str) -> Response:
        discussion = discussion_for_owner(user=request.user, group_id=group_id, discussion_id=discussion_id)
        return Response(
            approval_status_in_detail(
                discussion, user=request.user, detail=request.query_params.get("detail")
            )
        )


class GroupPendingApprovalsView(APIView):
    @extend_schema(
        summary="Pending approvals of one group's discussions you may decide (what is due first)",
        parameters=[LIMIT],
        responses=INBOX_ROW,
    )
    def get(self, request: Request, group_id: str) -> Response:
        return Response(
            pending_group_approvals(
                request.user,
                limit=inbox_limit(request.query_params, default=GROUP_INBOX_DEFAULT_LIMIT),
                group_id=group_id,
            )
        )


class AllGroupsPendingApprovalsView(APIView):
    @extend_schema(
        summary="Pending approvals of every group's discussions you may decide (what is due first)",
        parameters=[LIMIT],
        responses=INBOX_ROW,
    )
    def get(self, request: Request) -> Response:
        return Response(
            pending_group_approvals(
                request.user, limit=inbox_limit(request.query_params, default=GROUP_INBOX_DEFAULT_LIMIT)
            )
        )
