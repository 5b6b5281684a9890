"""GET /audit/entries: the audit ledger for staff and admins, oldest first, keyset-paginated by id."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.access import is_admin, is_staff_member
from approvals.api.audit_serializers import AuditEntryOutputSerializer, AuditEntryPageSerializer
from approvals.audit_filters import filtered_audit_entries
from common.query_params import QueryParams

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


class IsStaffOrAdmin(BasePermission):
    """The audit ledger is for staff and HITL admins; everyone else is refused (anonymous: 401)."""

    message = "Only staff and admins may read the audit ledger."

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        if not user or not user.is_authenticated or not user.is_active:
            return False
        return is_staff_member(user) or is_admin(user)


AUDIT_FILTER_PARAMETERS = [
    OpenApiParameter(
        "conversation", OpenApiTypes.UUID, description="Entries about this conversation (or subject id)."
    ),
    OpenApiParameter("pause", OpenApiTypes.UUID, description="Entries of this pause."),
    OpenApiParameter("actor", OpenApiTypes.STR, description="Exact actor, e.g. alice or system:timeout."),
    OpenApiParameter("verb", OpenApiTypes.STR, description="Exact verb, e.g. hitl.approval."),
    OpenApiParameter("since", OpenApiTypes.DATETIME, description="Created at or after (ISO-8601)."),
    OpenApiParameter("until", OpenApiTypes.DATETIME, description="Created before (ISO-8601)."),
]


class AuditEntryListView(APIView):
    permission_classes = [IsStaffOrAdmin]

    @extend_schema(
        tags=["audit"],
        operation_id="audit_entries_list",
        summary="List audit entries",
        description=(
            "The append-only audit ledger, oldest first (newest last), filtered by every given parameter. "
            "Page with `after` (the last `id` seen) and follow `next` until it is null. Staff and admins only."
        ),
        parameters=[
            *AUDIT_FILTER_PARAMETERS,
            OpenApiParameter(
                "limit",
                OpenApiTypes.INT,
                description=f"Page size, clamped to 1..{MAX_LIMIT} (default {DEFAULT_LIMIT}).",
            ),
            OpenApiParameter(
                "after", OpenApiTypes.INT, description="Return entries with an id greater than this."
            ),
        ],
        responses={
            200: AuditEntryPageSerializer,
            400: OpenApiResponse(description="A filter value is malformed (problem details with `errors`)."),
            401: OpenApiResponse(description="Not authenticated."),
            403: OpenApiResponse(description="Not staff or admin."),
        },
    )
    def get(self, request: Request) -> Response:
        query = QueryParams(request.query_params)
        entries = filtered_audit_entries(query)
        limit = query.integer("limit", default=DEFAULT_LIMIT, low=1, high=MAX_LIMIT)
        after = query.integer("after", default=0, low=0)
        query.raise_if_invalid()

        page = list(entries.filter(id__gt=after).order_by("id")[: limit + 1])
        next_url = None
        if len(page) > limit:
            page = page[:limit]
            params = request.query_params.copy()
            params["after"] = str(page[-1].id)
            params["limit"] = str(limit)
            next_url = request.build_absolute_uri(f"{request.path}?{params.urlencode()}")
        return Response({"results": AuditEntryOutputSerializer(page, many=True).data, "next": next_url})
