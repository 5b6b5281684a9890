from django.urls import path

from toolgate.api.secret_views import SecretDetailView, SecretListView

urlpatterns = [
    path("secretstore/secrets", SecretListView.as_view(), name="secrets"),
    path("secretstore/secrets/<str:name>", SecretDetailView.as_view(), name="secret"),
]
