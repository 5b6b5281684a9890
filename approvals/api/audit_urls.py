from django.urls import path

from approvals.api.audit_export_views import AuditExportView
from approvals.api.audit_views import AuditEntryListView

urlpatterns = [
    path("audit/entries", AuditEntryListView.as_view(), name="audit-entries"),
    path("audit/export", AuditExportView.as_view(), name="audit-export"),
]
