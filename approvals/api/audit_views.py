"""GET /audit/entries: the audit ledger for staff and admins, oldest first, keyset-paginated by id."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.access import is_admin
from approvals.api.audit_serializers import AuditEntryOutputSerializer, AuditEntryPageSerializer
from approvals.audit_selectors import audit_entries
from approvals.models import AuditEntry
from common.body_rules import unstorable_text_problem
from common.errors import BadRequest

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
BIGINT_MAX = 2**63 - 1
# PostgreSQL refuses a UTC offset of 16 hours or more ("time zone displacement out of range").
MAX_UTC_OFFSET = datetime.timedelta(hours=15, minutes=59, seconds=59)


class IsStaffOrAdmin(BasePermission):
    """The audit ledger is for staff and HITL admins; everyone else is refused (anonymous: 401)."""

    message = "Only staff and admins may read the audit ledger."

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        if not user or not user.is_authenticated or not user.is_active:
            return False
        return bool(user.is_staff) or is_admin(user)


class AuditFilterParser:
    """Reads the query string, collecting every bad value so one 400 names them all."""

    def __init__(self, params: Any) -> None:
        self.params = params
        self.errors: list[dict[str, str]] = []

    def text(self, name: str) -> str | None:
        raw = self.params.get(name) or None
        problem = unstorable_text_problem(raw) if raw else None
        if problem is not None:
            self.errors.append({"field": name, "message": problem})
            return None
        return raw

    def uuid(self, name: str) -> uuid.UUID | None:
        raw = self.params.get(name)
        if not raw:
            return None
        try:
            return uuid.UUID(raw)
        except ValueError:
            self.errors.append({"field": name, "message": f"'{raw}' is not a UUID."})
            return None

    def datetime(self, name: str) -> datetime.datetime | None:
        raw = (self.params.get(name) or "").strip()
        if not raw:
            return None
        try:
            # An unencoded '+' of a UTC offset arrives as a space.
            value = parse_datetime(raw) or parse_datetime("+".join(raw.rsplit(" ", 1)))
        except ValueError:
            value = None
        if value is None:
            self.errors.append(
                {
                    "field": name,
                    "message": f"'{raw}' is not an ISO-8601 date-time, e.g. 2026-11-30T10:15:30Z.",
                }
            )
            return None
        if not timezone.is_aware(value):
            return value.replace(tzinfo=datetime.UTC)
        offset = value.utcoffset()
        if offset is not None and abs(offset) > MAX_UTC_OFFSET:
            self.errors.append(
                {"field": name, "message": f"'{raw}' has a UTC offset outside -15:59..+15:59."}
            )
            return None
        return value

    def integer(self, name: str, *, default: int, low: int, high: int | None = None) -> int:
        raw = self.params.get(name)
        if raw in (None, ""):
            return default
        try:
            value = int(raw)
        except ValueError:
            self.errors.append({"field": name, "message": f"'{raw}' is not an integer."})
            return default
        return max(low, min(BIGINT_MAX if high is None else high, value))

    def raise_if_invalid(self) -> None:
        if self.errors:
            detail = "; ".join(f"{error['field']}: {error['message']}" for error in self.errors)
            raise BadRequest(detail, errors=self.errors)


def filtered_audit_entries(query: AuditFilterParser) -> QuerySet[AuditEntry]:
    """The entries the filters of ``/audit/entries`` and ``/audit/export`` select (errors collected in ``query``)."""
    return audit_entries(
        conversation=query.uuid("conversation"),
        pause=query.uuid("pause"),
        actor=query.text("actor"),
        verb=query.text("verb"),
        since=query.datetime("since"),
        until=query.datetime("until"),
    )


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
        query = AuditFilterParser(request.query_params)
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
