from django.urls import path

from approval_requests.api import stream_views, views

R = "approval-requests/<uuid:request_id>"

urlpatterns = [
    path("approval-requests", views.ApprovalRequestListView.as_view(), name="approval-requests"),
    path(
        "approval-requests/webhook-secret", views.WebhookSecretView.as_view(), name="approval-request-secret"
    ),
    path(R, views.ApprovalRequestView.as_view(), name="approval-request"),
    path(f"{R}/decision", views.DecisionView.as_view(), name="approval-request-decision"),
    path(f"{R}/claim", views.ClaimView.as_view(), name="approval-request-claim"),
    path(f"{R}/outcome", views.OutcomeView.as_view(), name="approval-request-outcome"),
    path(f"{R}/cancel", views.CancelView.as_view(), name="approval-request-cancel"),
    path(f"{R}/events", stream_views.ApprovalRequestEventsView.as_view(), name="approval-request-events"),
    path(".well-known/hitl-grant-keys", views.GrantKeysView.as_view(), name="grant-keys"),
]
