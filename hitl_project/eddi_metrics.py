"""GET /q/metrics: the same measurements under EDDI's metric names, for dashboards and alerts written
for EDDI (docs/eddi-compatibility.md). Only the names change: every sample, label and value is what
/metrics shows; measurements EDDI has no name for are left out."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample
from rest_framework.request import Request

from hitl_project.metrics_views import MetricsView, scrape_registry

# our metric family -> EDDI's (a counter's samples add _total, a histogram's _bucket/_sum/_count)
EDDI_NAMES = {
    "hitl_pauses": "eddi_hitl_pause_count",
    "hitl_resumes": "eddi_hitl_resume_count",
    "hitl_timeouts": "eddi_hitl_timeout_count",
    "hitl_group_member_pause_skipped": "eddi_group_member_pause_skipped_count",
    "hitl_tool_resumes": "eddi_hitl_tool_resume_count",
    "hitl_tool_guard": "eddi_hitl_tool_guard_count",
    "hitl_rule_matched": "eddi_hitl_rule_matched",
    "hitl_write_approvals": "eddi_operator_write_approval",
    "hitl_operator_canary": "eddi_operator_canary",
    "hitl_operator_canary_duration_seconds": "eddi_operator_canary_duration_seconds",
    "hitl_operator_gate_verified": "eddi_operator_gate_verified",
}


def renamed(family: Metric) -> Metric | None:
    """``family`` under EDDI's name, its samples renamed alike; None for a family EDDI has no name for."""
    name = EDDI_NAMES.get(family.name)
    if name is None:
        return None
    copy = Metric(name, family.documentation, family.type, family.unit)
    copy.samples = [
        Sample(
            name + sample.name[len(family.name) :],
            sample.labels,
            sample.value,
            sample.timestamp,
            sample.exemplar,
        )
        for sample in family.samples
    ]
    return copy


class Renamed:
    """A collector over ``registry`` that yields its families under EDDI's names."""

    def __init__(self, registry: Any) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        families: Iterable[Metric] = self._registry.collect()
        for family in families:
            if (copy := renamed(family)) is not None:
                yield copy


class EddiMetricsView(MetricsView):
    """As /metrics (public unless HITL_METRICS_PUBLIC=false), under EDDI's names."""

    @extend_schema(
        summary="The same metrics under EDDI's names (eddi_hitl_*), for dashboards written for EDDI",
        description="Anonymous unless HITL_METRICS_PUBLIC=false. See docs/eddi-compatibility.md.",
        responses={
            (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="Prometheus text format")
        },
    )
    def get(self, request: Request) -> HttpResponse:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(Renamed(scrape_registry()))
        return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
