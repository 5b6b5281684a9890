"""REST adapters for group discussions: start one (it runs to its end in the request), list, read, decide,
cancel and delete them."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.api.continuation_wait import clamp_wait, wait_until_settled
from approvals.continuation_runs import QUEUED, RESTORED, Continued
from approvals.votes import vote_answer
from common.query_params import QueryParams
from common.request_bodies import BodySerializer, TextField, validated_body
from common.throttles import TurnRateThrottle
from conversations.api.conversation_views import json_body
from groups import task_list
from groups.deletion import delete_discussion
from groups.discussion_decisions import GroupDecisionBodySerializer, approve_discussion, cancel_discussion
from groups.discussions import start_discussion
from groups.errors import ResumeNotStarted
from groups.models import DiscussionState
from groups.selectors import (
    discussion_decided,
    discussion_for_owner,
    discussions_of_group,
    latest_pause_reason,
)
from groups.snapshots import discussion_answer

QUESTION_MAX = 16_384
LIST_MAX = 100
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
        # EDDI's names (docs/eddi-compatibility.md)
        "speakerAgentId": serializers.UUIDField(allow_null=True, help_text="the same as member"),
        "speakerDisplayName": serializers.CharField(allow_null=True, help_text="the same as role"),
        "phaseName": serializers.CharField(help_text="the same as phase"),
        "type": serializers.CharField(
            help_text="the phase's kind (an EXECUTE phase's: TASK_RESULT), or ERROR or SKIPPED"
        ),
        "errorReason": serializers.CharField(allow_null=True, help_text="the same as note, unless OK"),
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


def eddi_discussion_fields(*, required: bool = True) -> dict[str, serializers.Field]:
    """EDDI's group conversation fields (groups.eddi_fields), fresh for each schema that carries them."""
    optional = {} if required else {"required": False}
    return {
        "id": serializers.UUIDField(help_text="the same as discussionId", **optional),
        "userId": serializers.CharField(allow_null=True, help_text="the owner's username", **optional),
        "originalQuestion": serializers.CharField(help_text="the same as question", **optional),
        "currentPhaseIndex": serializers.IntegerField(help_text="the same as phaseIndex", **optional),
        "synthesizedAnswer": serializers.CharField(
            allow_null=True, help_text="the newest SYNTHESIS entry's content", **optional
        ),
        "taskList": serializers.DictField(
            help_text="{tasks: [{id, description, assignedAgentId, ...}]}", **optional
        ),
        "pausedAtPhaseIndex": serializers.IntegerField(help_text="-1 unless awaiting approval", **optional),
        "pausedPhaseName": serializers.CharField(allow_null=True, **optional),
        "pausedAt": serializers.DateTimeField(allow_null=True, **optional),
        "hitlPauseType": serializers.CharField(allow_null=True, help_text="PHASE or TASK", **optional),
        "hitlPauseReason": serializers.CharField(allow_null=True, **optional),
        "hitlTimeoutPolicy": serializers.CharField(allow_null=True, **optional),
        "hitlApprovalTimeout": serializers.CharField(allow_null=True, **optional),
        "created": serializers.DateTimeField(**optional),
        "lastModified": serializers.DateTimeField(**optional),
    }


DISCUSSION = inline_serializer(
    "Discussion",
    {
        **eddi_discussion_fields(),
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
        summary="List the group's discussions you own (admins: all), newest first",
        parameters=[
            OpenApiParameter("index", int, required=False, description="how many to skip, default 0"),
            OpenApiParameter(
                "limit", int, required=False, description=f"1..{LIST_MAX} (clamped), default 20"
            ),
        ],
        responses={200: serializers.ListSerializer(child=DISCUSSION)},
    )
    def get(self, request: Request, group_id: str) -> Response:
        query = QueryParams(request.query_params)
        index = query.integer("index", default=0, low=0)
        limit = query.integer("limit", default=20, low=1, high=LIST_MAX)
        query.raise_if_invalid()
        discussions = discussions_of_group(user=request.user, group_id=group_id, index=index, limit=limit)
        return Response([discussion_answer(d) for d in discussions])

    @extend_schema(
        summary="Start a group discussion (it runs until it ends or pauses at an approval gate)",
        request=InputSerializer,
        responses={201: DISCUSSION},
    )
    def post(self, request: Request, group_id: str) -> Response:
        body = validated_body(self.InputSerializer, json_body(request, required=True))
        discussion = start_discussion(user=request.user, group_id=group_id, question=body["question"])
        response = Response(discussion_answer(discussion), status=status.HTTP_201_CREATED)
        response["Location"] = f"/groups/{discussion.group_id}/conversations/{discussion.id}"
        return response


class DiscussionView(APIView):
    @extend_schema(summary="Read a group discussion", responses=DISCUSSION)
    def get(self, request: Request, group_id: str, discussion_id: str) -> Response:
        discussion = discussion_for_owner(user=request.user, group_id=group_id, discussion_id=discussion_id)
        return Response(discussion_answer(discussion))

    @extend_schema(
        summary="Delete a discussion and its members' conversations (owner or admin; a pending approval is "
        "cancelled first; 409 while it runs)",
        request=None,
        responses={200: None},
    )
    def delete(self, request: Request, group_id: str, discussion_id: str) -> Response:
        delete_discussion(user=request.user, group_id=group_id, discussion_id=discussion_id)
        return Response(status=status.HTTP_200_OK)


def continued_answer(continued: Continued, *, wait: float = 0.0) -> Response:
    """The discussion as the decision left it. Without ``?wait``: 200 once decided, its
    continuation queued for the q-cluster (the discussion is IN_PROGRESS; a continuation that cannot
    start later puts the pause back, with an ERROR entry in the transcript). With ``?wait``: the
    discussion as the continuation left it (200), 202 when it was still running when the wait ran out,
    409 when it could not start (the pause is pending again). Either way 202 with ``vote`` when the
    decision was one approval of several (the approvals so far; the discussion still waits)."""
    if continued.tally is not None:  # one approval of several: nothing decided yet
        discussion = discussion_decided(continued.pause.subject_id)
        body = discussion_answer(discussion) | {"vote": vote_answer(continued.pause, continued.tally)}
        return Response(body, status=status.HTTP_202_ACCEPTED)
    if wait > 0 and continued.outcome == QUEUED:
        outcome = wait_until_settled(continued.pause.id, wait)
    else:
        outcome = continued.outcome
    discussion = discussion_decided(continued.pause.subject_id)
    if wait > 0 and outcome == RESTORED:
        raise ResumeNotStarted(
            latest_pause_reason(discussion) or "the resumed discussion could not start",
            currentState=discussion.state,
        )
    code = status.HTTP_202_ACCEPTED if wait > 0 and outcome == QUEUED else status.HTTP_200_OK
    return Response(discussion_answer(discussion), status=code)


class DiscussionApproveView(APIView):
    @extend_schema(
        summary="Decide a paused discussion (its continuation runs on the q-cluster; ?wait waits for it)",
        parameters=[
            OpenApiParameter(
                "wait",
                int,
                required=False,
                description="Seconds (0..60) to wait for the continuation, run in this request: the "
                "discussion as it left it (409 RESUME_NOT_STARTED when it could not start, 202 when it "
                "still runs)",
            )
        ],
        request=GroupDecisionBodySerializer,
        responses={200: DISCUSSION, 202: DISCUSSION},
    )
    def post(self, request: Request, group_id: str, discussion_id: str) -> Response:
        wait = clamp_wait(request.query_params.get("wait"))
        continued = approve_discussion(
            user=request.user,
            group_id=group_id,
            discussion_id=discussion_id,
            body=json_body(request, required=True),
            continue_here=wait > 0,
        )
        return continued_answer(continued, wait=wait)


class DiscussionCancelView(APIView):
    @extend_schema(
        summary="Cancel a discussion (409 when it already ended)", request=None, responses=DISCUSSION
    )
    def post(self, request: Request, group_id: str, discussion_id: str) -> Response:
        discussion = cancel_discussion(user=request.user, group_id=group_id, discussion_id=discussion_id)
        return Response(discussion_answer(discussion))
