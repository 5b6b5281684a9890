"""Operator metric relays: an external canary reports its outcome, a gate check reports its status.

Admins only. A bad outcome is a 400 naming the field and counts nothing; a bad duration still counts
the outcome (the duration is then simply not observed).
"""

from __future__ import annotations

import math
from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals import metrics
from approvals.api.permissions import AdminOnly
from common.request_bodies import BodySerializer, validated_body

OUTCOMES = ("pass", "fail", "unknown")
MUST_BE_AN_OUTCOME = "must be one of pass, fail, unknown"
# what validate_outcome accepts, for the schema: an outcome in any case, with what str.strip() trims around it
_STRIPPED = (
    r"[\t\n\u000b\u000c\r\u001c-\u001f \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*"
)
OUTCOME_PATTERN = (
    rf"^{_STRIPPED}(?:[Pp][Aa][Ss][Ss]|[Ff][Aa][Ii][Ll]|[Uu][Nn][Kk][Nn][Oo][Ww][Nn]){_STRIPPED}$"
)


@extend_schema_field({"type": "string", "pattern": OUTCOME_PATTERN})
class OutcomeField(serializers.CharField):
    pass


def _duration(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


class CanaryResultView(APIView):
    permission_classes = [AdminOnly]

    @extend_schema_serializer(component_name="CanaryResult")
    class InputSerializer(BodySerializer):
        """A canary's outcome; a duration that is not a finite number >= 0 is not observed. Any other field
        is a 400 naming it (S2: a write takes only what its contract says)."""

        outcome = OutcomeField(
            help_text="pass, fail or unknown (case-insensitive)",
            error_messages={key: MUST_BE_AN_OUTCOME for key in ("required", "null", "invalid", "blank")},
        )
        durationSeconds = serializers.JSONField(  # the wire name
            required=False, default=None, allow_null=True, help_text="Seconds (a number >= 0)"
        )
        durationMs = serializers.JSONField(  # EDDI's Manager sends milliseconds (docs/eddi-compatibility.md)
            required=False,
            default=None,
            allow_null=True,
            help_text="Milliseconds (a number >= 0), as EDDI's Manager sends it; durationSeconds wins if both",
        )

        def validate_outcome(self, outcome: str) -> str:
            if (
                not isinstance(self.initial_data.get("outcome"), str)
                or outcome.strip().lower() not in OUTCOMES
            ):
                raise serializers.ValidationError(MUST_BE_AN_OUTCOME)
            return outcome.strip().lower()

        def validate_durationSeconds(self, value: Any) -> float | None:
            return _duration(value)

        def validate_durationMs(self, value: Any) -> float | None:
            milliseconds = _duration(value)
            return None if milliseconds is None else milliseconds / 1000

    @extend_schema(
        summary="Report an operator canary's outcome (pass|fail|unknown) and duration in seconds",
        request=InputSerializer,
        responses={204: None},
    )
    def post(self, request: Request) -> Response:
        body = validated_body(self.InputSerializer, request.data)
        seconds = body["durationSeconds"] if body["durationSeconds"] is not None else body["durationMs"]
        metrics.record_operator_canary(body["outcome"], seconds)
        return Response(status=status.HTTP_204_NO_CONTENT)


class GateStatusView(APIView):
    permission_classes = [AdminOnly]

    @extend_schema_serializer(component_name="GateStatus")
    class InputSerializer(BodySerializer):
        """Whether the gate was verified: true or false, nothing that merely looks like one; any other
        field is a 400 naming it."""

        verified = serializers.BooleanField(
            error_messages={key: "must be a boolean" for key in ("required", "null", "invalid")}
        )

        def validate_verified(self, verified: bool) -> bool:
            if not isinstance(self.initial_data.get("verified"), bool):
                raise serializers.ValidationError("must be a boolean")
            return verified

    @extend_schema(
        summary="Report whether the approval gate was verified (sets hitl_operator_gate_verified)",
        request=InputSerializer,
        responses={204: None},
    )
    def post(self, request: Request) -> Response:
        metrics.set_operator_gate_verified(validated_body(self.InputSerializer, request.data)["verified"])
        return Response(status=status.HTTP_204_NO_CONTENT)
