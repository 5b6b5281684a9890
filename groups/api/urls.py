from django.urls import path

from groups.api import discussion_views, stream_views, views

D = "groups/<str:group_id>/conversations/<str:discussion_id>"

urlpatterns = [
    path("groupstore/groups", views.GroupListView.as_view(), name="groups"),
    path("groupstore/groups/<str:group_id>", views.GroupDetailView.as_view(), name="group"),
    path(
        "groups/<str:group_id>/conversations",
        discussion_views.DiscussionListView.as_view(),
        name="group-discussions",
    ),
    # before D, which would take "stream" for a discussion id
    path(
        "groups/<str:group_id>/conversations/stream",
        stream_views.DiscussionStartStreamView.as_view(),
        name="group-discussions-stream",
    ),
    path(D, discussion_views.DiscussionView.as_view(), name="group-discussion"),
    path(f"{D}/approve", discussion_views.DiscussionApproveView.as_view(), name="group-discussion-approve"),
    path(
        f"{D}/approve/stream",
        stream_views.DiscussionApproveStreamView.as_view(),
        name="group-discussion-approve-stream",
    ),
    path(f"{D}/cancel", discussion_views.DiscussionCancelView.as_view(), name="group-discussion-cancel"),
]
