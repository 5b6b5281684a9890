"""Operator metric relays: an external canary reports its outcome, a gate check reports its status.

Admins only. A bad outcome is a 400 naming the field and counts nothing; a bad duration still counts
the outcome (the duration is then simply not observed).
"""

from __future__ import annotations

import math
from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals import metrics
from approvals.api.permissions import AdminOnly
from approvals.errors import BadRequest

OUTCOMES = ("pass", "fail", "unknown")


def _body(request: Request) -> dict[str, Any]:
    data = request.data
    if not isinstance(data, dict):
        raise BadRequest("The body must be a JSON object", errors=[{"field": "body", "message": "not an object"}])
    return data


def _duration(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


class CanaryResultView(APIView):
    permission_classes = [AdminOnly]

    @extend_schema(
        summary="Report an operator canary's outcome (pass|fail|unknown) and duration in seconds",
        request=inline_serializer("CanaryResult", {"outcome": serializers.ChoiceField(OUTCOMES),
                                                   "durationSeconds": serializers.FloatField(required=False)}),
        responses={204: None},
    )
    def post(self, request: Request) -> Response:
        body = _body(request)
        outcome = body.get("outcome")
        if not isinstance(outcome, str) or outcome.strip().lower() not in OUTCOMES:
            raise BadRequest("outcome must be one of pass, fail, unknown",
                             errors=[{"field": "outcome", "message": "must be one of pass, fail, unknown"}])
        metrics.record_operator_canary(outcome.strip().lower(), _duration(body.get("durationSeconds")))
        return Response(status=status.HTTP_204_NO_CONTENT)


class GateStatusView(APIView):
    permission_classes = [AdminOnly]

    @extend_schema(
        summary="Report whether the approval gate was verified (sets hitl_operator_gate_verified)",
        request=inline_serializer("GateStatus", {"verified": serializers.BooleanField()}),
        responses={204: None},
    )
    def post(self, request: Request) -> Response:
        verified = _body(request).get("verified")
        if not isinstance(verified, bool):
            raise BadRequest("verified must be true or false",
                             errors=[{"field": "verified", "message": "must be a boolean"}])
        metrics.set_operator_gate_verified(verified)
        return Response(status=status.HTTP_204_NO_CONTENT)
