"""Token login, and the health check."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema, extend_schema_serializer, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from common.errors import ApplicationError
from common.request_bodies import BodySerializer, TextField, validated_body
from hitl_project.api_tokens import issue_api_token
from hitl_project.health import health_report

REQUIRED_STRING = {key: "required string" for key in ("required", "null", "invalid", "blank")}


class InvalidCredentials(ApplicationError):
    status = 401
    code = "UNAUTHENTICATED"
    title = "Unauthenticated"


class LoginThrottle(AnonRateThrottle):
    rate = "30/min"


class TokenView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [LoginThrottle]

    @extend_schema_serializer(component_name="Credentials")
    class InputSerializer(BodySerializer):
        """A username and its password (a body that is not an object lacks both)."""

        takes_unknown_fields = True
        username = TextField(trim_whitespace=False, min_length=1, error_messages=REQUIRED_STRING)
        password = TextField(trim_whitespace=False, min_length=1, error_messages=REQUIRED_STRING)

        def to_internal_value(self, data: Any) -> dict[str, Any]:
            return super().to_internal_value(data if isinstance(data, dict) else {})

        def problem_detail(self, errors: list[dict[str, str]]) -> str:
            return "username and password are required"

    @extend_schema(
        summary="Exchange a username and password for an API token",
        request=InputSerializer,
        responses=inline_serializer("TokenOut", {"token": serializers.CharField()}),
        auth=[],
    )
    def post(self, request: Request) -> Response:
        data = validated_body(self.InputSerializer, request.data)
        user = authenticate(request=request._request, username=data["username"], password=data["password"])
        if user is None or not user.is_active:
            raise InvalidCredentials("Invalid username or password")
        return Response({"token": issue_api_token(user=user)})


HEALTH = inline_serializer(
    "Health",
    {
        "status": serializers.CharField(
            help_text="ok, degraded (a key cannot work) or unavailable (no database)"
        ),
        "database": serializers.CharField(),
        "checks": serializers.DictField(
            child=serializers.CharField(),
            help_text=("database, secretStore, auditKey, pinningKey: 'ok', 'warning: …' or 'error: …'"),
        ),
    },
)


class HealthView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Health check: 200 when the database answers and the configured keys can work, 503 otherwise",
        responses={200: HEALTH, 503: HEALTH},
        auth=[],
    )
    def get(self, request: Request) -> Response:
        status, body = health_report()
        return Response(body, status=status)
