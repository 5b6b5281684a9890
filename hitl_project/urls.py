from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from approvals.api.operator_views import CanaryResultView, GateStatusView
from hitl_project.auth_views import HealthView, TokenView

urlpatterns = [
    # first: Django tries the patterns in order, and here the approval cycle's endpoints (start, say,
    # resume) resolve in half the time; no other pattern matches a path of theirs, so no answer changes
    path("", include("conversations.api.urls")),
    # the service's front door: the API documentation (a temporary redirect, so it may change later)
    path("", RedirectView.as_view(pattern_name="swagger-ui", permanent=False), name="home"),
    path("admin/", admin.site.urls),
    path("healthz", HealthView.as_view(), name="healthz"),
    path("auth/token", TokenView.as_view(), name="auth-token"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("administration/operator/canary-result", CanaryResultView.as_view(), name="operator-canary"),
    path("administration/operator/gate-status", GateStatusView.as_view(), name="operator-gate"),
    path("", include("approvals.api.audit_urls")),
    path("", include("toolgate.api.secret_urls")),
    path("", include("schedules.api.urls")),
    path("", include("hitl_project.metrics_urls")),
    path("", include("groups.api.urls")),
    path("", include("approval_requests.api.urls")),
    path("", include("slack_surface.api.urls")),
]

# a URL no route matches is a problem-details 404 too (common/problems.py)
handler404 = "common.problems.not_found_handler"
