"""SSE adapters: start a discussion, or decide a paused one, and watch it run (docs/groups.md, "SSE").

What can be refused before the stream starts is an HTTP error like on the plain endpoints: 401 without
a valid token, 429 over the caller's request rate; the start body (400), an unknown group (404) and the
caller's cap of pending approvals (409 LIMIT_REACHED); on approve, access to the discussion
(403/404, no existence oracle). Everything after that is told in the stream: an approve body that does
not validate, a discussion not awaiting approval, a member not deployed, a failure, are a ``group_error``
event that closes it, so a watching client never gets a 4xx in the middle of a conversation.
"""

from __future__ import annotations

from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from approvals.continuation_runs import Continued
from approvals.pause_caps import require_room_for_a_pause
from approvals.votes import vote_answer
from common.errors import ApplicationError
from common.request_bodies import json_body, validated_body
from common.throttles import TurnRateThrottle
from groups import events as ev
from groups import sse
from groups.api.discussion_views import DiscussionListView
from groups.discussion_decisions import GroupDecisionBodySerializer, approve_discussion
from groups.discussions import start_discussion
from groups.errors import ResumeNotStarted
from groups.selectors import discussion_decided, discussion_for_owner, latest_pause_reason, live_group

NO_OUTCOME = "the discussion ended without telling its outcome"
QUEUED_MESSAGE = (
    "the decision was recorded; its continuation runs on the q-cluster: read the discussion for its progress"
)


def _stream_responses(events: str) -> dict[Any, OpenApiResponse]:
    return {
        (200, sse.MEDIA_TYPE): OpenApiResponse(
            OpenApiTypes.STR,
            description="Server-sent events (`event: <name>` and `data: <JSON>` per event; a `: keep-alive` "
            f"comment while nothing happens): {events}. The stream ends after its one closing event "
            "(`awaiting_approval`, `cancelled`, `group_complete`, `group_error`, `queued`). "
            "Names and data: docs/groups.md, SSE.",
        ),
        401: OpenApiResponse(description="Not authenticated (problem details)."),
    }


class DiscussionStartStreamView(APIView):
    renderer_classes = [JSONRenderer, sse.EventStreamRenderer]
    throttle_classes = [TurnRateThrottle]

    @extend_schema(
        summary="Start a group discussion and stream its events (SSE)",
        request=DiscussionListView.InputSerializer,
        responses=_stream_responses(
            "`discussion_started`, then `phase_started`, `member_answered`, `task_status`, "
            "`member_pause_skipped` as it runs"
        )
        | {
            400: OpenApiResponse(description="The body is not a valid start body (problem details)."),
            404: OpenApiResponse(description="No such group, or it was deleted (problem details)."),
            409: OpenApiResponse(
                description="The caller is at the cap of pending approvals (`LIMIT_REACHED`, problem details)."
            ),
        },
    )
    def post(self, request: Request, group_id: str) -> StreamingHttpResponse:
        body = validated_body(DiscussionListView.InputSerializer, json_body(request, required=True))
        live_group(group_id=group_id)
        require_room_for_a_pause(owner_id=request.user.pk)  # a 409 before the stream, like the plain start's
        user, question = request.user, body["question"]

        def run(sink: ev.EventSink) -> sse.Event:
            start_discussion(user=user, group_id=group_id, question=question, events=sink)
            return sse.error_event(500, "INTERNAL", NO_OUTCOME)

        return sse.event_stream_response(run)


def closing_of(continued: Continued) -> sse.Event:
    """The closing event of a decision whose continuation sent none: ``queued`` for the q-cluster, or the
    ``group_error`` of a continuation that could not start (the pause is pending again)."""
    discussion = discussion_decided(continued.pause.subject_id)
    where = {"discussionId": str(discussion.pk), "state": discussion.state}
    if continued.outcome == "queued":
        return ev.QUEUED, where | {"pauseId": str(continued.pause.pk), "message": QUEUED_MESSAGE}
    if continued.tally is not None:
        return ev.VOTE_RECORDED, where | vote_answer(continued.pause, continued.tally)
    if continued.outcome == "restored":
        reason = latest_pause_reason(discussion) or "the resumed discussion could not start"
        return sse.error_of(ResumeNotStarted(reason), **where)
    return sse.error_event(500, "INTERNAL", NO_OUTCOME, **where)


class DiscussionApproveStreamView(APIView):
    renderer_classes = [JSONRenderer, sse.EventStreamRenderer]

    @extend_schema(
        summary="Decide a paused discussion and stream its continuation (SSE)",
        request=GroupDecisionBodySerializer,
        responses=_stream_responses(
            "`hitl_resume` when the decision was taken, then the events of the discussion running on; a "
            "body that does not validate, or a discussion not awaiting approval, is a `group_error` event"
        )
        | {
            403: OpenApiResponse(description="Not the owner, an admin or an approver (problem details)."),
            404: OpenApiResponse(
                description="Unknown discussion, for admins and approvers (problem details)."
            ),
        },
    )
    def post(self, request: Request, group_id: str, discussion_id: str) -> StreamingHttpResponse:
        discussion = discussion_for_owner(user=request.user, group_id=group_id, discussion_id=discussion_id)
        user, body, unreadable = request.user, None, None
        try:
            body = json_body(request, required=True)
        except ApplicationError as exc:  # told in the stream, like any other bad body
            unreadable = exc

        def run(sink: ev.EventSink) -> sse.Event:
            if unreadable is not None:
                return sse.error_of(unreadable, discussionId=str(discussion.pk))
            try:
                continued = approve_discussion(
                    user=user, group_id=group_id, discussion_id=discussion_id, body=body, events=sink
                )
            except ApplicationError as exc:
                return sse.error_of(exc, discussionId=str(discussion.pk))
            return closing_of(continued)

        return sse.event_stream_response(run)
