"""REST adapters of the secret store: admins only; a value goes in and never comes out."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.api.permissions import AdminOnly
from approvals.pause_summaries import iso
from common.request_bodies import BodySerializer, TextField, checked_by, validated_body
from toolgate.models import StoredSecret
from toolgate.outbound import secret_store
from toolgate.selectors import secret_list

NAME_PARAM = OpenApiParameter(
    "name",
    {"type": "string", "pattern": f"^{secret_store.NAME_PATTERN.pattern}$"},
    OpenApiParameter.PATH,
    description="1 to 128 characters of A-Z a-z 0-9 _ . -",
)


class SecretRowSerializer(serializers.Serializer):
    name = serializers.CharField()
    updatedAt = serializers.DateTimeField()


def _row(secret: StoredSecret) -> dict[str, str | None]:
    return {"name": secret.name, "updatedAt": iso(secret.updated_at)}


class SecretListView(APIView):
    permission_classes = [AdminOnly]

    @extend_schema(
        summary="Secret names and update times (never values)", responses=SecretRowSerializer(many=True)
    )
    def get(self, request: Request) -> Response:
        return Response([_row(s) for s in secret_list()])


class SecretDetailView(APIView):
    permission_classes = [AdminOnly]

    @extend_schema_serializer(component_name="SecretValue")
    class InputSerializer(BodySerializer):
        """The secret's new value; any other field is a 400 naming it."""

        value = TextField(
            trim_whitespace=False,
            min_length=1,
            help_text="Encrypted at rest; never returned",
            error_messages={key: "required" for key in ("required", "null", "invalid", "blank")},
        )

        def validate_value(self, value: str) -> str:
            return checked_by(secret_store.validate_value, value)

    @extend_schema(
        summary="Set a secret (encrypted at rest; the value is never returned)",
        parameters=[NAME_PARAM],
        request=InputSerializer,
        responses={200: SecretRowSerializer},
    )
    def put(self, request: Request, name: str) -> Response:
        body = validated_body(self.InputSerializer, request.data)
        return Response(_row(secret_store.set_secret(name=name, value=body["value"])))

    @extend_schema(summary="Delete a secret", parameters=[NAME_PARAM], request=None, responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        secret_store.delete_secret(name=name)
        return Response(status=status.HTTP_204_NO_CONTENT)
