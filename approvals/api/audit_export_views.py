"""GET /audit/export: a filtered selection of the audit ledger as a streamed CSV or JSON Lines file."""

from __future__ import annotations

from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from approvals.api.audit_views import AUDIT_FILTER_PARAMETERS, IsStaffOrAdmin
from approvals.audit_export import EXPORT_COLUMNS, FORMATS, export_response
from approvals.audit_filters import filtered_audit_entries
from common.query_params import BIGINT_MAX, QueryParams


class ProblemsAsJson(BaseContentNegotiation):
    """Errors are always problem+json, whatever Accept says; the file itself bypasses rendering.

    DRF would otherwise read ``?format=csv`` as its renderer override and answer 404, and refuse an
    ``Accept: text/csv`` with 406, before the view runs.
    """

    def select_parser(self, request: Request, parsers: list[Any]) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(
        self, request: Request, renderers: list[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        return renderers[0], renderers[0].media_type


class AuditExportView(APIView):
    permission_classes = [IsStaffOrAdmin]
    content_negotiation_class = ProblemsAsJson

    @extend_schema(
        tags=["audit"],
        operation_id="audit_entries_export",
        summary="Export audit entries",
        description=(
            "The entries `/audit/entries` selects with the same filters, oldest first, as one streamed "
            "attachment: CSV (a header row, then one row per entry; `detail` is JSON text; an empty cell "
            "is null) or JSON Lines (one entry object per line). Columns: "
            + ", ".join(f"`{column}`" for column in EXPORT_COLUMNS)
            + ". Memory does not grow with the selection. Staff and admins only."
        ),
        parameters=[
            OpenApiParameter(
                "format", OpenApiTypes.STR, enum=list(FORMATS), description="csv (default) or jsonl."
            ),
            *AUDIT_FILTER_PARAMETERS,
            OpenApiParameter(
                "after", OpenApiTypes.INT, description="Only entries with an id greater than this."
            ),
            OpenApiParameter(
                "limit", OpenApiTypes.INT, description="At most this many entries (at least 1; default all)."
            ),
        ],
        responses={
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR, description="The file, streamed as an attachment (CSV or JSON Lines)."
            ),
            (200, "application/jsonl"): OpenApiResponse(OpenApiTypes.STR),
            400: OpenApiResponse(
                description="Unknown format or a malformed filter (problem details with `errors`)."
            ),
            401: OpenApiResponse(description="Not authenticated."),
            403: OpenApiResponse(description="Not staff or admin."),
        },
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        # Every parameter is checked before the response starts: once the first byte of a 200 is sent, an
        # error can only cut the file short.
        query = QueryParams(request.query_params)
        raw_format = request.query_params.get("format") or "csv"
        export_format = raw_format.strip().lower()
        if export_format not in FORMATS:
            query.errors.append({"field": "format", "message": f"'{raw_format}' is not one of csv, jsonl."})
        entries = filtered_audit_entries(query)
        after = query.integer("after", default=0, low=0)
        limit = query.integer("limit", default=BIGINT_MAX, low=1)
        query.raise_if_invalid()
        entries = entries.filter(id__gt=after) if after else entries
        return export_response(request, entries if limit == BIGINT_MAX else entries[:limit], export_format)
