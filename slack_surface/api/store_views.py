"""The Slack integration store: admins only. Secrets are named by ``${vault:NAME}`` and never shown."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.api.permissions import AdminOnly
from approvals.pause_summaries import iso
from common.errors import NotFound
from common.request_bodies import BodySerializer, TextField, validated_body
from slack_surface.integrations import (
    IntegrationInput,
    create_integration,
    delete_integration,
    every_integration,
    integration_named,
    update_integration,
)
from slack_surface.models import SlackIntegration


class IntegrationSerializer(serializers.Serializer):
    name = serializers.CharField()
    agentId = serializers.UUIDField(allow_null=True)
    groupId = serializers.UUIDField(allow_null=True)
    environment = serializers.CharField()
    conversationOwner = serializers.CharField()
    signingSecret = serializers.CharField(help_text="a ${vault:NAME} reference; the value is never shown")
    botToken = serializers.CharField(help_text="a ${vault:NAME} reference; the value is never shown")
    hitlApprovalChannel = serializers.CharField(allow_blank=True)
    hitlApproverUserIds = serializers.CharField(allow_blank=True)
    updatedAt = serializers.DateTimeField()


def _row(integration: SlackIntegration) -> dict[str, Any]:
    return {
        "name": integration.name,
        "agentId": str(integration.agent_id) if integration.agent_id else None,
        "groupId": str(integration.group_id) if integration.group_id else None,
        "environment": integration.environment,
        "conversationOwner": integration.run_as.get_username(),
        "signingSecret": integration.signing_secret_ref,
        "botToken": integration.bot_token_ref,
        "hitlApprovalChannel": integration.approval_channel,
        "hitlApproverUserIds": integration.approver_user_ids,
        "updatedAt": iso(integration.updated_at),
    }


class _Fields(BodySerializer):
    agentId = serializers.UUIDField(
        required=False,
        allow_null=True,
        default=None,
        error_messages={"invalid": "must be a UUID"},
        help_text="the agent whose conversations the threads are; exactly one of agentId and groupId",
    )
    groupId = serializers.UUIDField(
        required=False,
        allow_null=True,
        default=None,
        error_messages={"invalid": "must be a UUID"},
        help_text="the group a thread's message starts a discussion on; exactly one of agentId and groupId",
    )
    environment = TextField(required=False, default="production")
    conversationOwner = TextField(required=False, allow_blank=True, default="")
    signingSecret = TextField(error_messages={"required": "required"})
    botToken = TextField(error_messages={"required": "required"})
    hitlApprovalChannel = TextField(required=False, allow_blank=True, default="", max_length=64)
    hitlApproverUserIds = TextField(required=False, allow_blank=True, default="", max_length=2000)


def _input(body: dict[str, Any]) -> IntegrationInput:
    return IntegrationInput(
        agent_id=body["agentId"],
        group_id=body["groupId"],
        environment=body["environment"],
        conversation_owner=body["conversationOwner"] or None,
        signing_secret=body["signingSecret"],
        bot_token=body["botToken"],
        approval_channel=body["hitlApprovalChannel"],
        approver_user_ids=body["hitlApproverUserIds"],
    )


class IntegrationListView(APIView):
    permission_classes = [AdminOnly]

    @extend_schema_serializer(component_name="SlackIntegrationCreate")
    class InputSerializer(_Fields):
        """A new integration; any other field is a 400 naming it."""

        name = TextField(error_messages={"required": "required"}, max_length=64)

    @extend_schema(summary="Slack integrations", responses=IntegrationSerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response([_row(i) for i in every_integration()])

    @extend_schema(
        summary="Create a Slack integration (secrets as ${vault:NAME} references)",
        request=InputSerializer,
        responses={201: IntegrationSerializer},
    )
    def post(self, request: Request) -> Response:
        body = validated_body(self.InputSerializer, request.data)
        created = create_integration(name=body["name"], data=_input(body), creator=request.user)
        return Response(_row(integration_named(created.name)), status=status.HTTP_201_CREATED)


class IntegrationDetailView(APIView):
    permission_classes = [AdminOnly]

    @extend_schema_serializer(component_name="SlackIntegrationUpdate")
    class InputSerializer(_Fields):
        """The integration's new settings (all of them); any other field is a 400 naming it."""

    @extend_schema(summary="One Slack integration", responses=IntegrationSerializer)
    def get(self, request: Request, name: str) -> Response:
        integration = integration_named(name)
        if integration is None:
            raise NotFound(f"No Slack integration named '{name}'.")
        return Response(_row(integration))

    @extend_schema(
        summary="Replace a Slack integration's settings",
        request=InputSerializer,
        responses=IntegrationSerializer,
    )
    def put(self, request: Request, name: str) -> Response:
        body = validated_body(self.InputSerializer, request.data)
        update_integration(name=name, data=_input(body), creator=request.user)
        return Response(_row(integration_named(name)))

    @extend_schema(
        summary="Delete a Slack integration (its thread mappings with it)",
        request=None,
        responses={204: None},
    )
    def delete(self, request: Request, name: str) -> Response:
        delete_integration(name=name)
        return Response(status=status.HTTP_204_NO_CONTENT)
