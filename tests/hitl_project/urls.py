"""/metrics plus one route with an id, to see that requests are labelled by pattern."""

from django.http import HttpRequest, JsonResponse
from django.urls import include, path


def thing(request: HttpRequest, thing_id: int) -> JsonResponse:
    return JsonResponse({"id": thing_id})


urlpatterns = [
    path("", include("hitl_project.metrics_urls")),
    path("things/<int:thing_id>", thing, name="thing"),
]
