"""REST adapters for group discussions: start one (it runs to its end in the request) and read it back."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_serializer, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.continuation_runs import Continued
from approvals.votes import vote_answer
from common.request_bodies import BodySerializer, TextField, validated_body
from common.throttles import TurnRateThrottle
from conversations.api.conversation_views import json_body
from groups import task_list
from groups.discussion_decisions import GroupDecisionBodySerializer, approve_discussion, cancel_discussion
from groups.discussions import start_discussion
from groups.errors import ResumeNotStarted
from groups.models import DiscussionState, GroupConversation
from groups.selectors import discussion_for_owner, latest_pause_reason
from groups.snapshots import discussion_snapshot

QUESTION_MAX = 16_384
ENTRY_STATUSES = ["OK", "SKIPPED", "ERROR"]
TASK_STATUSES = task_list.STATUSES

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
        "toolCallRejected": serializers.BooleanField(
            required=False, help_text="the member's gated tool call was rejected as system:group"
        ),
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
        "feedback": serializers.CharField(
            required=False, help_text="the reviewer's note on a rejected result sent back (RETRY)"
        ),
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
        "cancelRequested": serializers.BooleanField(
            help_text="a cancel is on its way to the running discussion"
        ),
    },
)


class DiscussionListView(APIView):
    throttle_classes = [TurnRateThrottle]

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
        summary="Start a group discussion (it runs until it ends or pauses at an approval gate)",
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


def continued_answer(continued: Continued) -> Response:
    """The discussion as the decision's continuation left it; 409 when it could not start (the pause is
    pending again), 202 when it was queued for the q-cluster, or when the decision was one approval of
    several (``vote``: the approvals so far; the discussion still waits)."""
    discussion = GroupConversation.objects.get(pk=continued.pause.subject_id)
    if continued.tally is not None:  # one approval of several: nothing decided yet
        body = discussion_snapshot(discussion) | {"vote": vote_answer(continued.pause, continued.tally)}
        return Response(body, status=status.HTTP_202_ACCEPTED)
    if continued.outcome == "restored":
        raise ResumeNotStarted(
            latest_pause_reason(discussion) or "the resumed discussion could not start",
            currentState=discussion.state,
        )
    code = status.HTTP_202_ACCEPTED if continued.outcome == "queued" else status.HTTP_200_OK
    return Response(discussion_snapshot(discussion), status=code)


class DiscussionApproveView(APIView):
    @extend_schema(
        summary="Decide a paused discussion (its continuation runs before the answer)",
        request=GroupDecisionBodySerializer,
        responses={200: DISCUSSION, 202: DISCUSSION},
    )
    def post(self, request: Request, group_id: str, discussion_id: str) -> Response:
        continued = approve_discussion(
            user=request.user,
            group_id=group_id,
            discussion_id=discussion_id,
            body=json_body(request, required=True),
        )
        return continued_answer(continued)


class DiscussionCancelView(APIView):
    @extend_schema(
        summary="Cancel a discussion (409 when it already ended)", request=None, responses=DISCUSSION
    )
    def post(self, request: Request, group_id: str, discussion_id: str) -> Response:
        discussion = cancel_discussion(user=request.user, group_id=group_id, discussion_id=discussion_id)
        return Response(discussion_snapshot(discussion))
