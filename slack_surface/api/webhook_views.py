"""Slack's two webhooks. They authenticate by Slack's request signature, not by our tokens: DRF's
authentication and permissions are off for them, and the signature is checked before anything else."""

from __future__ import annotations

import json

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.errors import BadRequest
from slack_surface.integrations import every_integration
from slack_surface.interactions import handle_click, verified_click
from slack_surface.signatures import SIGNATURE_HEADER, TIMESTAMP_HEADER, signing_integration
from slack_surface.threads import receive_event

EVENT_ANSWER = inline_serializer(
    "SlackEventAnswer",
    {
        "challenge": serializers.CharField(required=False, help_text="url_verification only"),
        "ok": serializers.BooleanField(required=False),
    },
)
EVENT_BODY = inline_serializer(
    "SlackEventBody",
    {
        "type": serializers.CharField(help_text="url_verification or event_callback"),
        "challenge": serializers.CharField(required=False),
        "event_id": serializers.CharField(required=False),
        "event": serializers.DictField(required=False),
    },
)
INTERACTION_BODY = inline_serializer(
    "SlackInteractionBody", {"payload": serializers.CharField(help_text="the block_actions payload, JSON")}
)
SIGNED = "Signed by Slack (X-Slack-Signature, X-Slack-Request-Timestamp); 401 otherwise."


class SlackEventsView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Slack Events API: url_verification and messages in threads (" + SIGNED + ")",
        request=EVENT_BODY,
        responses={200: EVENT_ANSWER, 401: OpenApiResponse(description="not signed by Slack")},
        auth=[],
    )
    def post(self, request: Request) -> Response:
        body = request.body
        integration = signing_integration(
            every_integration(),
            body=body,
            timestamp=request.headers.get(TIMESTAMP_HEADER),
            signature=request.headers.get(SIGNATURE_HEADER),
        )
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise BadRequest(
                "The body must be a JSON object", errors=[{"field": "body", "message": "not JSON"}]
            )
        return Response(receive_event(integration, payload))


class SlackInteractiveView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Slack interactivity: the Approve / Reject buttons of approval cards (" + SIGNED + ")",
        request={"application/x-www-form-urlencoded": INTERACTION_BODY},
        responses={
            200: OpenApiResponse(description="handled (empty body); the card is updated through the Web API"),
            401: OpenApiResponse(description="not signed by Slack, or replayed"),
            403: OpenApiResponse(description="the button names no integration"),
        },
        auth=[],
    )
    def post(self, request: Request) -> Response:
        integration, click = verified_click(
            body=request.body,
            timestamp=request.headers.get(TIMESTAMP_HEADER),
            signature=request.headers.get(SIGNATURE_HEADER),
        )
        handle_click(integration, click)
        return Response(status=200)
