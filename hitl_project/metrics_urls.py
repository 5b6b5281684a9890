"""GET /metrics (include at the root: path("", include("hitl_project.metrics_urls")))."""

from django.urls import path

from hitl_project.metrics_views import MetricsView

urlpatterns = [
    path("metrics", MetricsView.as_view(), name="metrics"),
]
