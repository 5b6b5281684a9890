"""REST adapters for the group store: versioned group documents (docs/groups.md)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.api.permissions import AdminWritesAuthenticatedReads
from common.query_params import requested_version
from groups import store
from groups.selectors import group_list, group_version

VERSION_PARAM = OpenApiParameter(
    "version",
    {"type": "integer", "minimum": 1},
    required=False,
    description="Group version, a positive integer (latest if absent)",
)
SAVED = inline_serializer(
    "GroupSaved", {"id": serializers.UUIDField(), "version": serializers.IntegerField()}
)
# A group document is a free-form object checked whole by groups.group_document, as agent documents are.
DOCUMENT = OpenApiTypes.OBJECT


class GroupListView(APIView):
    permission_classes = [AdminWritesAuthenticatedReads]

    @extend_schema(
        summary="List groups",
        responses=inline_serializer(
            "GroupRow",
            {
                "id": serializers.UUIDField(),
                "name": serializers.CharField(),
                "version": serializers.IntegerField(),
            },
            many=True,
        ),
    )
    def get(self, request: Request) -> Response:
        return Response(
            [{"id": str(g.id), "name": g.name, "version": g.latest_version} for g in group_list()]
        )

    @extend_schema(summary="Create a group (version 1)", request=DOCUMENT, responses={201: SAVED})
    def post(self, request: Request) -> Response:
        row = store.create_group(document=request.data, created_by=request.user)
        return Response({"id": str(row.group_id), "version": row.version}, status=status.HTTP_201_CREATED)


class GroupDetailView(APIView):
    permission_classes = [AdminWritesAuthenticatedReads]

    @extend_schema(
        summary="Read a group document",
        parameters=[VERSION_PARAM],
        responses=inline_serializer(
            "GroupDocument",
            {
                "id": serializers.UUIDField(),
                "version": serializers.IntegerField(),
                "document": serializers.DictField(),
            },
        ),
    )
    def get(self, request: Request, group_id: str) -> Response:
        row = group_version(group_id=group_id, version=requested_version(request))
        return Response({"id": str(row.group_id), "version": row.version, "document": row.document})

    @extend_schema(summary="Save a new version of a group", request=DOCUMENT, responses=SAVED)
    def put(self, request: Request, group_id: str) -> Response:
        row = store.update_group(group_id=group_id, document=request.data)
        return Response({"id": str(row.group_id), "version": row.version})

    @extend_schema(summary="Delete a group", responses={204: None})
    def delete(self, request: Request, group_id: str) -> Response:
        store.delete_group(group_id=group_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
