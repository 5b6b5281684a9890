"""The probe views of bench/request_overhead.py, in front of the project's URLs (bench only)."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


@csrf_exempt
def plain(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


class Unauthenticated(APIView):
    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []
    throttle_classes: list[Any] = []

    def post(self, request: Request) -> Response:
        return Response({"ok": True})


class UnauthenticatedQuery(Unauthenticated):
    def post(self, request: Request) -> Response:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return Response({"ok": True})


class TokenAuthenticated(APIView):
    """The project's defaults: token authentication, the permission, the throttle."""

    def post(self, request: Request) -> Response:
        return Response({"ok": True, "user": request.user.pk})


urlpatterns = [
    path("_probe/plain", plain),
    path("_probe/drf", Unauthenticated.as_view()),
    path("_probe/drf-query", UnauthenticatedQuery.as_view()),
    path("_probe/drf-token", TokenAuthenticated.as_view()),
    path("", include("hitl_project.urls")),
]
