from django.urls import path

from groups.api import discussion_views, views

urlpatterns = [
    path("groupstore/groups", views.GroupListView.as_view(), name="groups"),
    path("groupstore/groups/<str:group_id>", views.GroupDetailView.as_view(), name="group"),
    path(
        "groups/<str:group_id>/conversations",
        discussion_views.DiscussionListView.as_view(),
        name="group-discussions",
    ),
    path(
        "groups/<str:group_id>/conversations/<str:discussion_id>",
        discussion_views.DiscussionView.as_view(),
        name="group-discussion",
    ),
]
