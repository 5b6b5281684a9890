"""REST adapters for agents: the agent store, deployment and ZIP backup."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import FileUploadParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.access import is_admin
from approvals.api.permissions import AdminOnly, AdminWritesAuthenticatedReads
from common.errors import BadRequest
from common.parsers import CheckedJSONParser
from common.query_params import requested_version
from conversations import agent_archive, agents
from conversations.agents import report_or_raise
from conversations.selectors import agent_list
from toolgate.outbound import redact_json_value

VERSION_PARAM = OpenApiParameter(
    "version",
    {"type": "integer", "minimum": 1},
    required=False,
    description="Agent version, a positive integer (latest if absent)",
)
ENVIRONMENT_PARAM = OpenApiParameter(
    "environment",
    str,
    OpenApiParameter.PATH,
    enum=["production", "test"],
    description="Deployment environment",
)
SAVED = inline_serializer(
    "AgentSaved",
    {
        "id": serializers.UUIDField(),
        "version": serializers.IntegerField(),
        "warnings": serializers.ListField(child=serializers.DictField()),
    },
)
DOCUMENT = OpenApiTypes.OBJECT


def _saved(row: Any, document: Any) -> dict[str, Any]:
    warnings = [w.as_dict() for w in report_or_raise(document).warnings]
    return {"id": str(row.agent_id), "version": row.version, "warnings": warnings}


class AgentListView(APIView):
    permission_classes = [AdminWritesAuthenticatedReads]

    @extend_schema(
        summary="List agents",
        responses=inline_serializer(
            "AgentRow",
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
            [{"id": str(a.id), "name": a.name, "version": a.latest_version} for a in agent_list()]
        )

    @extend_schema(summary="Create an agent (version 1)", request=DOCUMENT, responses={201: SAVED})
    def post(self, request: Request) -> Response:
        row = agents.create_agent(document=request.data, created_by=request.user)
        return Response(_saved(row, request.data), status=status.HTTP_201_CREATED)


class AgentDetailView(APIView):
    permission_classes = [AdminWritesAuthenticatedReads]

    @extend_schema(
        summary="Read an agent document (credential-looking values redacted except for admins)",
        parameters=[VERSION_PARAM],
        responses=DOCUMENT,
    )
    def get(self, request: Request, agent_id: str) -> Response:
        row = agents.agent_version(agent_id, requested_version(request))
        document = row.document if is_admin(request.user) else redact_json_value(row.document)
        return Response({"id": str(row.agent_id), "version": row.version, "document": document})

    @extend_schema(summary="Save a new version", request=DOCUMENT, responses=SAVED)
    def put(self, request: Request, agent_id: str) -> Response:
        row = agents.update_agent(agent_id=agent_id, document=request.data)
        return Response(_saved(row, request.data))

    @extend_schema(
        summary="Delete an agent (running conversations keep their version)", responses={204: None}
    )
    def delete(self, request: Request, agent_id: str) -> Response:
        agents.delete_agent(agent_id=agent_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


DEPLOYMENT = inline_serializer(
    "DeploymentStatus",
    {
        "agentId": serializers.UUIDField(),
        "environment": serializers.CharField(),
        "deployedVersions": serializers.ListField(child=serializers.IntegerField()),
    },
)


def _deployment(agent_id: str, environment: str) -> dict[str, Any]:
    versions = agents.deployed_versions(agent_id=agent_id, environment=environment)
    return {"agentId": str(agent_id), "environment": environment, "deployedVersions": versions}


class DeployView(APIView):
    permission_classes = [AdminOnly]

    @extend_schema(
        summary="Deploy an agent version",
        parameters=[ENVIRONMENT_PARAM, VERSION_PARAM],
        request=None,
        responses=DEPLOYMENT,
    )
    def post(self, request: Request, environment: str, agent_id: str) -> Response:
        agents.deploy_agent(agent_id=agent_id, version=requested_version(request), environment=environment)
        return Response(_deployment(agent_id, environment))


class UndeployView(APIView):
    permission_classes = [AdminOnly]

    @extend_schema(
        summary="Undeploy an agent version (all versions without ?version)",
        parameters=[ENVIRONMENT_PARAM, VERSION_PARAM],
        request=None,
        responses=DEPLOYMENT,
    )
    def post(self, request: Request, environment: str, agent_id: str) -> Response:
        agents.undeploy_agent(agent_id=agent_id, version=requested_version(request), environment=environment)
        return Response(_deployment(agent_id, environment))


class DeploymentStatusView(APIView):
    permission_classes = [AdminWritesAuthenticatedReads]

    @extend_schema(summary="Deployment status", parameters=[ENVIRONMENT_PARAM], responses=DEPLOYMENT)
    def get(self, request: Request, environment: str, agent_id: str) -> Response:
        return Response(_deployment(agent_id, environment))


class ExportView(APIView):
    permission_classes = [AdminOnly]  # a backup holds the documents verbatim

    @extend_schema(
        summary="Export an agent version as ZIP",
        parameters=[VERSION_PARAM],
        responses={(200, "application/zip"): OpenApiTypes.BINARY},
    )
    def get(self, request: Request, agent_id: str) -> HttpResponse:
        filename, data = agent_archive.export_agent(agent_id=agent_id, version=requested_version(request))
        response = HttpResponse(data, content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response


class ImportView(APIView):
    permission_classes = [AdminOnly]
    parser_classes = [MultiPartParser, FileUploadParser, CheckedJSONParser]

    @extend_schema(
        summary="Import agent documents from a ZIP (all or nothing)",
        request={"application/zip": OpenApiTypes.BINARY, "multipart/form-data": OpenApiTypes.BINARY},
        responses={
            201: inline_serializer(
                "Imported", {"id": serializers.UUIDField(), "version": serializers.IntegerField()}, many=True
            )
        },
    )
    def post(self, request: Request) -> Response:
        if request.content_type.startswith("application/zip") or request.content_type.startswith(
            "application/octet-stream"
        ):
            data = request.body
        else:
            upload = request.FILES.get("file")
            if upload is None:
                raise BadRequest(
                    "send the ZIP as the body (application/zip) or as the form field 'file'",
                    errors=[{"field": "file", "message": "required"}],
                )
            data = upload.read()
        rows = agent_archive.import_agents(data=data, created_by=request.user)
        return Response(
            [{"id": str(r.agent_id), "version": r.version} for r in rows], status=status.HTTP_201_CREATED
        )
