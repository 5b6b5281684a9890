"""SSE adapter: watch an approval request's status until it is decided or ends (approval_requests.status_stream).

What can be refused is refused before the stream starts, as an HTTP problem like on the plain read:
401 without a valid token, and the access of ``GET /approval-requests/{id}`` (403/404, no existence oracle).
"""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from approval_requests import status_stream
from approval_requests.api.permissions import SignedInOrServiceAccount
from approval_requests.selectors import readable_request

ID = OpenApiParameter("request_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
# One server-sent event as a client parses it (what a schema of text/event-stream describes): its name
# and its data, the JSON text of {"id", "status"}.
STATUS_EVENT = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["status"]},
        "data": {"type": "string", "description": 'JSON text: {"id", "status"}'},
    },
    "required": ["event", "data"],
}


class ApprovalRequestEventsView(APIView):
    permission_classes = [SignedInOrServiceAccount]
    renderer_classes = [JSONRenderer, status_stream.EventStreamRenderer]

    @extend_schema(
        summary="Watch an approval request's status (SSE) until it is decided or ends",
        parameters=[ID],
        responses={
            (200, status_stream.MEDIA_TYPE): OpenApiResponse(
                STATUS_EVENT,
                description='Server-sent events: `event: status` with `data: {"id", "status"}`, first the '
                "current status, then each change; a `: keep-alive` comment while nothing changes. The "
                "stream ends after the first status other than PENDING (APPROVED, REJECTED, CANCELLED, "
                "EXPIRED): read the request for what was decided.",
            ),
            401: OpenApiResponse(description="Not authenticated (problem details)."),
            403: OpenApiResponse(
                description="Not its service account, the person it was made for, an approver or an admin "
                "(problem details; also for an unknown id, unless a reviewer asks)."
            ),
            404: OpenApiResponse(description="Unknown request, for admins and approvers (problem details)."),
        },
    )
    def get(self, request: Request, request_id: str) -> StreamingHttpResponse:
        found = readable_request(request.user, request_id)
        return status_stream.status_stream_response(found.pk)
