from django.urls import include, path

urlpatterns = [
    path("", include("approvals.api.audit_urls")),
]
