"""REST adapters of the secret store: admins only; a value goes in and never comes out."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.errors import BadRequest
from approvals.presenters import iso
from conversations.api.permissions import AdminOnly
from toolgate import secret_store
from toolgate.models import StoredSecret


class SecretRowSerializer(serializers.Serializer):
    name = serializers.CharField()
    updatedAt = serializers.DateTimeField()


def _row(secret: StoredSecret) -> dict[str, str | None]:
    return {"name": secret.name, "updatedAt": iso(secret.updated_at)}


class SecretListView(APIView):
    permission_classes = [AdminOnly]

    @extend_schema(summary="Secret names and update times (never values)", responses=SecretRowSerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response([_row(s) for s in StoredSecret.objects.order_by("name").only("name", "updated_at")])


class SecretDetailView(APIView):
    permission_classes = [AdminOnly]

    @extend_schema(summary="Set a secret (encrypted at rest; the value is never returned)",
                   request=inline_serializer("SecretValue", {"value": serializers.CharField()}),
                   responses={200: SecretRowSerializer})
    def put(self, request: Request, name: str) -> Response:
        data = request.data if isinstance(request.data, dict) else None
        if data is None:
            raise BadRequest("The body must be a JSON object", errors=[{"field": "body", "message": "not an object"}])
        unknown = sorted(set(data) - {"value"})
        if unknown:
            raise BadRequest(f"unknown field '{unknown[0]}'", errors=[{"field": f, "message": "unknown field"}
                                                                     for f in unknown])
        return Response(_row(secret_store.set_secret(name=name, value=data.get("value"))))

    @extend_schema(summary="Delete a secret", request=None, responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        secret_store.delete_secret(name=name)
        return Response(status=status.HTTP_204_NO_CONTENT)
