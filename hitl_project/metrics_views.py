"""GET /metrics: Prometheus text format, summed over every process of this host.

Public by default (HITL_METRICS_PUBLIC=true), as scrapers usually carry no credentials; otherwise
staff and admins only, by token or session (401 anonymous, 403 anyone else).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from approvals import metrics
from approvals.access import is_admin, is_staff_member
from hitl_project.metrics_setup import ENV_VAR


def metrics_are_public() -> bool:
    return bool(getattr(settings, "HITL_METRICS_PUBLIC", True))


class CanReadMetrics(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        return bool(
            user and user.is_authenticated and user.is_active and (is_staff_member(user) or is_admin(user))
        )


class _GateVerifiedDefault:
    """A mostrecent gauge has no sample until some process sets it; the contract says 0 until reported."""

    def __init__(self, inner: MultiProcessCollector) -> None:
        self._inner = inner

    def collect(self) -> Iterator[Any]:
        seen = False
        for family in self._inner.collect():
            if family.name == metrics.GATE_VERIFIED:
                seen = True
                if not family.samples:
                    family.add_sample(metrics.GATE_VERIFIED, {}, 0.0)
            yield family
        if not seen:
            yield GaugeMetricFamily(metrics.GATE_VERIFIED, metrics.GATE_VERIFIED_HELP, value=0.0)


def scrape_registry() -> CollectorRegistry:
    """A fresh registry over the files of every process when multi-process mode is on, else this process's."""
    metrics.meters()  # so this process's meters (and their zero samples) exist before the first count
    path = os.environ.get(ENV_VAR)
    if not path:
        return REGISTRY
    registry = CollectorRegistry()
    registry.register(_GateVerifiedDefault(MultiProcessCollector(None, path=path)))
    return registry


class MetricsView(APIView):
    permission_classes = [CanReadMetrics]

    def get_authenticators(self) -> list[Any]:
        return [] if metrics_are_public() else super().get_authenticators()

    def get_permissions(self) -> list[Any]:
        return [AllowAny()] if metrics_are_public() else super().get_permissions()

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # Scrapers ask for text/plain or openmetrics; the body is ours, the renderer only serves errors.
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(
        summary="Prometheus metrics of every process on this host (text format)",
        description=(
            "Anonymous unless HITL_METRICS_PUBLIC=false; then staff and admins only. See docs/metrics.md."
        ),
        responses={
            (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="Prometheus text format")
        },
    )
    def get(self, request: Request) -> HttpResponse:
        return HttpResponse(generate_latest(scrape_registry()), content_type=CONTENT_TYPE_LATEST)
