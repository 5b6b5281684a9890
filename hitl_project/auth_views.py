"""Token login, and the health check."""

from __future__ import annotations

from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from approvals.errors import ApplicationError, BadRequest
from hitl_project.health import health_report


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

    @extend_schema(
        summary="Exchange a username and password for an API token",
        request=inline_serializer("Credentials", {"username": serializers.CharField(),
                                                  "password": serializers.CharField()}),
        responses=inline_serializer("TokenOut", {"token": serializers.CharField()}),
        auth=[],
    )
    def post(self, request: Request) -> Response:
        data = request.data if isinstance(request.data, dict) else {}
        errors = [{"field": f, "message": "required string"} for f in ("username", "password")
                  if not isinstance(data.get(f), str) or not data.get(f)]
        if errors:
            raise BadRequest("username and password are required", errors=errors)
        user = authenticate(request=request._request, username=data["username"], password=data["password"])
        if user is None or not user.is_active:
            raise InvalidCredentials("Invalid username or password")
        token, _ = Token.objects.get_or_create(user=user)
        return Response({"token": token.key})


HEALTH = inline_serializer("Health", {
    "status": serializers.CharField(help_text="ok, degraded (a key cannot work) or unavailable (no database)"),
    "database": serializers.CharField(),
    "checks": serializers.DictField(child=serializers.CharField(), help_text=(
        "database, secretStore, auditKey, pinningKey: 'ok', 'warning: …' or 'error: …'")),
})


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
