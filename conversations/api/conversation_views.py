"""REST adapters for 1:1 conversations and their approvals. Each view: parse, authorize, call a service."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_serializer,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.access import may_read_turns
from approvals.actors import actor_for_user
from approvals.api.continuation_wait import clamp_wait, wait_until_settled
from approvals.api.inbox_query import inbox_limit
from approvals.api.pause_serializers import INBOX_ROW, LastDecisionSerializer
from approvals.continuation_runs import QUEUED
from approvals.decision_input import DecisionBodySerializer
from approvals.models import Engine
from approvals.pause_summaries import inbox_row_from_values
from approvals.selectors import pending_inbox_rows
from approvals.votes import vote_answer
from common.body_rules import context_size_problem
from common.errors import BadRequest, Forbidden
from common.request_bodies import BodySerializer, TextField, json_body, validated_body
from common.throttles import TurnRateThrottle
from conversations import turns, undo_redo
from conversations.cancels import REQUESTED, CancelResult
from conversations.conversation_decisions import (
    AFTER_ANSWER,
    HERE,
    continued_snapshot,
    decide_conversation,
)
from conversations.models import Conversation, ConversationState
from conversations.selectors import (
    conversation_for_decision,
    conversation_for_talk,
    talk_on_version,
)
from conversations.snapshots import approval_status_in_detail, snapshot


def _snapshot_fields() -> dict[str, serializers.Field]:
    """The snapshot's fields, fresh for each response that carries them (a field belongs to one serializer)."""
    return {
        "conversationId": serializers.UUIDField(),
        "agentId": serializers.UUIDField(),
        "agentVersion": serializers.IntegerField(),
        "environment": serializers.CharField(),
        "state": serializers.ChoiceField(ConversationState.choices),
        "conversationState": serializers.ChoiceField(
            ConversationState.choices, help_text="the same as state, under EDDI's name"
        ),
        "output": serializers.ListField(child=serializers.CharField()),
        "actions": serializers.ListField(child=serializers.CharField()),
        "quickReplies": serializers.ListField(child=serializers.DictField(), help_text="of the latest turn"),
        "properties": serializers.DictField(),
        "steps": serializers.ListField(
            child=serializers.DictField(),
            help_text="The newest live steps (HITL_SNAPSHOT_STEPS, 50), oldest first",
        ),
        "stepCount": serializers.IntegerField(help_text="How many live steps the conversation has"),
    }


SNAPSHOT = inline_serializer("Snapshot", _snapshot_fields())
CANCEL_ANSWER = inline_serializer(
    "CancelAnswer",
    {
        **_snapshot_fields(),
        "cancelRequested": inline_serializer(
            "CancelRequested",
            {"by": serializers.CharField(), "at": serializers.DateTimeField()},
            required=False,
            help_text="Present while a running turn was told to stop and had not stopped yet",
        ),
    },
)
CONTINUED = inline_serializer(
    "ContinuedSnapshot",
    {**_snapshot_fields(), "lastDecision": LastDecisionSerializer(allow_null=True)},
)
DECIDED = inline_serializer(
    "Decided",
    {
        "conversationId": serializers.UUIDField(),
        "pauseId": serializers.UUIDField(),
        "verdict": serializers.CharField(),
        "decidedBy": serializers.CharField(),
        "state": serializers.CharField(),
    },
)
INPUT_MAX = 16_384


class ContextField(serializers.DictField):
    """A turn's context: an object of at most ``HITL_CONTEXT_MAX_BYTES`` bytes of canonical JSON
    (common.body_rules.context_size_problem)."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        problem = context_size_problem(value)
        if problem is not None:
            raise serializers.ValidationError(problem)
        return value


def _context_field() -> serializers.DictField:
    return ContextField(
        required=False,
        allow_null=True,
        default=dict,
        error_messages={"not_a_dict": "must be an object"},
        help_text="Conversation context for this turn ({context.X} in templates); at most "
        "HITL_CONTEXT_MAX_BYTES (64 KiB) of JSON",
    )


class StartView(APIView):
    throttle_classes = [TurnRateThrottle]

    @extend_schema_serializer(component_name="StartInput")
    class InputSerializer(BodySerializer):
        """The optional start body; any other field is a 400 naming it."""

        context = _context_field()

    @extend_schema(
        summary="Start a conversation",
        parameters=[OpenApiParameter("environment", str, enum=["production", "test"], required=False)],
        request=InputSerializer,
        responses={201: SNAPSHOT},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        body = validated_body(self.InputSerializer, json_body(request, required=False))
        environment = request.query_params.get("environment", "production")
        if environment not in ("production", "test"):
            raise BadRequest(
                f"unknown environment '{environment}'",
                errors=[{"field": "environment", "message": "must be production or test"}],
            )
        started = turns.start_conversation(
            user=request.user, agent_id=agent_id, environment=environment, context=body["context"] or {}
        )
        response = Response(
            snapshot(started.conversation, steps=started.steps), status=status.HTTP_201_CREATED
        )
        response["Location"] = f"/agents/{started.conversation.id}"
        return response


class ConversationView(APIView):
    throttle_classes = [TurnRateThrottle]  # its say (a read is never counted)

    @extend_schema_serializer(component_name="SayInput")
    class InputSerializer(BodySerializer):
        """The say body; any other field is a 400 naming it."""

        input = TextField(
            max_length=INPUT_MAX,
            allow_blank=True,
            trim_whitespace=False,
            error_messages={
                "required": "required string",
                "null": "required string",
                "invalid": "required string",
                "max_length": f"over {INPUT_MAX} characters",
            },
        )
        context = _context_field()

    @extend_schema(summary="Read a conversation snapshot", responses=SNAPSHOT)
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = _readable(request.user, conversation_id)
        return Response(snapshot(conversation))

    @extend_schema(
        summary="Say something (409 while awaiting approval; the input is not consumed)",
        request=InputSerializer,
        responses=SNAPSHOT,
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        body = validated_body(self.InputSerializer, json_body(request, required=True))
        talk = talk_on_version(request.user, conversation_id)
        said = turns.say(
            conversation=talk, user=request.user, user_input=body["input"], context=body["context"] or {}
        )
        return Response(snapshot(said.conversation, steps=said.steps))


def _readable(user: Any, conversation_id: str) -> Conversation:
    """The snapshot is for owner and admin; an approver may read it while it awaits a decision."""
    conversation = conversation_for_decision(user, conversation_id)
    if not may_read_turns(
        user, owner_id=conversation.owner_id, awaiting=conversation.state == ConversationState.AWAITING_HUMAN
    ):
        raise Forbidden("Approvers may read a conversation only while it is awaiting approval")
    return conversation


class UndoView(APIView):
    @extend_schema(
        summary="Undo the last step (409 while awaiting approval or running)",
        request=None,
        responses=SNAPSHOT,
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = conversation_for_talk(request.user, conversation_id)
        return Response(snapshot(undo_redo.undo(conversation=conversation)))


class RedoView(APIView):
    @extend_schema(
        summary="Redo the last undone step (409 while awaiting approval or running)",
        request=None,
        responses=SNAPSHOT,
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = conversation_for_talk(request.user, conversation_id)
        return Response(snapshot(undo_redo.redo(conversation=conversation)))


def cancel_answer(result: CancelResult) -> dict[str, Any]:
    """The snapshot; ``cancelRequested`` {by, at} when a running turn was told to stop and still runs."""
    body = snapshot(result.conversation)
    if (requested := result.cancel_request()) is not None:
        body["cancelRequested"] = requested
    return body


class EndView(APIView):
    @extend_schema(
        summary="End the conversation (a pending approval is cancelled and audited; a running turn "
        "stops before its next task)",
        request=None,
        responses=CANCEL_ANSWER,
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = conversation_for_talk(request.user, conversation_id)
        ended = turns.end_conversation(conversation=conversation, actor=actor_for_user(request.user))
        return Response(cancel_answer(ended))


class CancelView(APIView):
    @extend_schema(
        summary="Cancel a pending approval (200) or a running turn (202 while it stops before its "
        "next task; 200 if it had not started)",
        request=None,
        responses={200: CANCEL_ANSWER, 202: CANCEL_ANSWER},
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = conversation_for_decision(request.user, conversation_id)
        result = turns.cancel_conversation(conversation=conversation, actor=actor_for_user(request.user))
        still_running = result.outcome == REQUESTED
        return Response(
            cancel_answer(result), status=status.HTTP_202_ACCEPTED if still_running else status.HTTP_200_OK
        )


class ResumeView(APIView):
    """The decision. Check order: body (400) -> access (403/404) -> existence -> state (409)."""

    @extend_schema(
        summary="Decide a pending approval",
        parameters=[
            OpenApiParameter(
                "wait",
                int,
                required=False,
                description="Seconds (0..60) to wait for the continuation; "
                "the continued snapshot is returned instead",
            )
        ],
        request=DecisionBodySerializer,
        responses={
            200: PolymorphicProxySerializer(
                "DecisionAnswer", serializers=[DECIDED, CONTINUED], resource_type_field_name=None
            )
        },
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        wait = clamp_wait(request.query_params.get("wait"))
        continued = decide_conversation(
            user=request.user,
            conversation_id=conversation_id,
            body=json_body(request, required=True),
            continuation=HERE if wait > 0 else AFTER_ANSWER,
        )
        pause = continued.pause
        if continued.tally is not None:  # one approval of several: nothing decided yet
            return Response(
                {"conversationId": str(pause.subject_id), **vote_answer(pause, continued.tally)},
                status=status.HTTP_202_ACCEPTED,
            )
        if wait > 0:
            if continued.outcome == QUEUED:  # inline continuations are off: wait here for the q-cluster
                wait_until_settled(pause.id, wait)
            return Response(continued_snapshot(continued))
        return ThenRun(
            continued.then,
            {
                "conversationId": str(pause.subject_id),
                "pauseId": str(pause.id),
                "verdict": pause.verdict,
                "decidedBy": pause.decided_by,
                "state": ConversationState.IN_PROGRESS,
            },
        )


class ThenRun(Response):
    """A response that runs ``then()`` once it has been sent: the server calls ``close()`` after the last
    byte (WSGI servers, and Django's ASGI handler alike). It runs before the response's own close, which
    ends the request (``request_finished`` hands the database connection back), so it runs on the
    request's connection and the request's clean-up follows it."""

    def __init__(self, then: Any, data: Any, **kwargs: Any) -> None:
        super().__init__(data, **kwargs)
        self._then = then

    def close(self) -> None:
        then, self._then = self._then, None
        try:
            if then is not None:
                then()
        finally:
            super().close()


APPROVAL_STATUS = inline_serializer(
    "ApprovalStatus",
    {
        "conversationId": serializers.UUIDField(),
        "state": serializers.ChoiceField(ConversationState.choices),
        "pauseId": serializers.UUIDField(allow_null=True, help_text="null unless awaiting a decision"),
        "pausedAt": serializers.DateTimeField(allow_null=True),
        "pauseReason": serializers.CharField(allow_null=True),
        "pauseType": serializers.CharField(allow_null=True, help_text="RULE or TOOL_CALL"),
        "timeoutPolicy": serializers.CharField(allow_null=True),
        "approvalTimeout": serializers.CharField(allow_null=True, help_text="null when waiting indefinitely"),
        "deadline": serializers.DateTimeField(allow_null=True, help_text="null when waiting indefinitely"),
        "pauseDetails": serializers.DictField(
            allow_null=True,
            help_text="RULE {type, reason, actions, outcomeUnknown}; TOOL_CALL "
            "{type, calls, executedUngatedCalls, "
            "outcomeUnknown}",
        ),
        "lastDecision": LastDecisionSerializer(allow_null=True),
        "conversation": serializers.DictField(
            required=False, help_text="the snapshot; only with detail=full"
        ),
        # with detail=full: EDDI's snapshot fields, beside the summary (conversations.eddi_fields)
        "agentId": serializers.UUIDField(required=False),
        "agentVersion": serializers.IntegerField(required=False),
        "userId": serializers.CharField(required=False, allow_null=True, help_text="the owner's username"),
        "environment": serializers.CharField(required=False),
        "conversationState": serializers.ChoiceField(
            ConversationState.choices, required=False, help_text="the same as state"
        ),
        "conversationOutputs": serializers.ListField(
            child=serializers.DictField(),
            required=False,
            help_text="the snapshot's steps: {input, actions, output: [{type: text, text}]}",
        ),
        "conversationProperties": serializers.DictField(required=False),
        "hitlPausedAt": serializers.DateTimeField(required=False, allow_null=True),
        "hitlPauseReason": serializers.CharField(required=False, allow_null=True),
        "hitlTimeoutPolicy": serializers.CharField(required=False, allow_null=True),
        "hitlApprovalTimeout": serializers.CharField(required=False, allow_null=True),
        "hitlPauseType": serializers.CharField(required=False, allow_null=True),
        "hitlPendingToolCalls": serializers.DictField(
            required=False,
            allow_null=True,
            help_text="a TOOL_CALL pause's calls, redacted: no raw arguments, transcript or trace; a pinned "
            'request\'s fingerprint only as "<REDACTED>"',
        ),
    },
)


class ApprovalStatusView(APIView):
    @extend_schema(
        summary="Pause summary (detail=full adds the snapshot; approver-only callers only while paused)",
        parameters=[OpenApiParameter("detail", str, enum=["summary", "full"], required=False)],
        responses=APPROVAL_STATUS,
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = conversation_for_decision(request.user, conversation_id)
        return Response(
            approval_status_in_detail(
                conversation, user=request.user, detail=request.query_params.get("detail")
            )
        )


class PendingApprovalsView(APIView):
    @extend_schema(
        summary="Pending approvals you may decide (what is due first: by deadline, none last, then oldest)",
        parameters=[
            OpenApiParameter("limit", int, required=False, description="1..1000 (clamped), default 200")
        ],
        responses=INBOX_ROW,
    )
    def get(self, request: Request) -> Response:
        rows = pending_inbox_rows(
            request.user, limit=inbox_limit(request.query_params), surface=Engine.REGULAR
        )
        return Response([inbox_row_from_values(row) for row in rows])
