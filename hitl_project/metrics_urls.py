"""GET /metrics, and GET /q/metrics under EDDI's names (include at the root: path("", include(...)))."""

from django.urls import path

from hitl_project.eddi_metrics import EddiMetricsView
from hitl_project.metrics_views import MetricsView

urlpatterns = [
    path("metrics", MetricsView.as_view(), name="metrics"),
    path("q/metrics", EddiMetricsView.as_view(), name="eddi-metrics"),  # EDDI's path and names
]
