"""REST adapters for group discussions: start one (it runs to its end in the request) and read it back."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_serializer, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.request_bodies import BodySerializer, TextField, validated_body
from conversations.api.conversation_views import json_body
from groups.discussions import start_discussion
from groups.models import DiscussionState, GroupConversation
from groups.selectors import discussion_for_owner

QUESTION_MAX = 16_384
ENTRY_STATUSES = ["OK", "SKIPPED", "ERROR"]
TASK_STATUSES = ["PENDING", "ASSIGNED", "IN_PROGRESS", "COMPLETED", "FAILED"]

TRANSCRIPT_ENTRY = inline_serializer(
    "DiscussionTranscriptEntry",
    {
        "phase": serializers.CharField(),
        "phaseType": serializers.ChoiceField(["OPINION", "CHALLENGE", "SYNTHESIS", "EXECUTE"]),
        "member": serializers.UUIDField(
            allow_null=True, help_text="the member's agentId; null: the discussion's own"
        ),
        "role": serializers.CharField(allow_null=True),
        "content": serializers.CharField(
            allow_blank=True, help_text="what the member said (empty unless OK)"
        ),
        "status": serializers.ChoiceField(ENTRY_STATUSES),
        "note": serializers.CharField(required=False, help_text="why a turn was SKIPPED or an ERROR"),
        "round": serializers.IntegerField(required=False, help_text="the round of a phase with repeats"),
        "task": serializers.CharField(required=False, help_text="the task of a failed EXECUTE turn"),
    },
    many=True,
)
TASK = inline_serializer(
    "DiscussionTask",
    {
        "phase": serializers.CharField(),
        "id": serializers.CharField(),
        "description": serializers.CharField(),
        "assignee": serializers.UUIDField(),
        "dependsOn": serializers.ListField(child=serializers.CharField()),
        "status": serializers.ChoiceField(TASK_STATUSES),
        "result": serializers.CharField(allow_null=True),
        "note": serializers.CharField(required=False, help_text="why a task FAILED"),
    },
    many=True,
)
DISCUSSION = inline_serializer(
    "Discussion",
    {
        "discussionId": serializers.UUIDField(),
        "groupId": serializers.UUIDField(),
        "groupVersion": serializers.IntegerField(),
        "state": serializers.ChoiceField(DiscussionState.choices),
        "phaseIndex": serializers.IntegerField(),
        "turnCount": serializers.IntegerField(),
        "question": serializers.CharField(),
        "transcript": TRANSCRIPT_ENTRY,
        "tasks": TASK,
    },
)


def discussion_snapshot(discussion: GroupConversation) -> dict[str, Any]:
    return {
        "discussionId": str(discussion.id),
        "groupId": str(discussion.group_id),
        "groupVersion": discussion.group_version,
        "state": discussion.state,
        "phaseIndex": discussion.phase_index,
        "turnCount": discussion.turn_count,
        "question": discussion.question,
        "transcript": discussion.transcript,
        "tasks": discussion.tasks,
    }


class DiscussionListView(APIView):
    @extend_schema_serializer(component_name="StartDiscussionInput")
    class InputSerializer(BodySerializer):
        """The start body; any other field is a 400 naming it."""

        question = TextField(
            min_length=1,
            max_length=QUESTION_MAX,
            trim_whitespace=False,
            error_messages={
                "required": "required string",
                "null": "required string",
                "invalid": "required string",
                "blank": "must not be empty",
                "max_length": f"over {QUESTION_MAX} characters",
            },
        )

    @extend_schema(
        summary="Start a group discussion (it runs to its end; 409 while the group has approval gates)",
        request=InputSerializer,
        responses={201: DISCUSSION},
    )
    def post(self, request: Request, group_id: str) -> Response:
        body = validated_body(self.InputSerializer, json_body(request, required=True))
        discussion = start_discussion(user=request.user, group_id=group_id, question=body["question"])
        response = Response(discussion_snapshot(discussion), status=status.HTTP_201_CREATED)
        response["Location"] = f"/groups/{discussion.group_id}/conversations/{discussion.id}"
        return response


class DiscussionView(APIView):
    @extend_schema(summary="Read a group discussion", responses=DISCUSSION)
    def get(self, request: Request, group_id: str, discussion_id: str) -> Response:
        discussion = discussion_for_owner(user=request.user, group_id=group_id, discussion_id=discussion_id)
        return Response(discussion_snapshot(discussion))
