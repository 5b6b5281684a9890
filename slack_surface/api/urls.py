from django.urls import path

from slack_surface.api.store_views import IntegrationDetailView, IntegrationListView
from slack_surface.api.webhook_views import SlackEventsView, SlackInteractiveView

urlpatterns = [
    path("integrations/slack/events", SlackEventsView.as_view(), name="slack-events"),
    path("integrations/slack/interactive", SlackInteractiveView.as_view(), name="slack-interactive"),
    path("integrationstore/slack", IntegrationListView.as_view(), name="slack-integrations"),
    path("integrationstore/slack/<str:name>", IntegrationDetailView.as_view(), name="slack-integration"),
]
