from django.urls import path

from groups.api import approval_views, discussion_views, stream_views, views

D = "groups/<str:group_id>/conversations/<str:discussion_id>"

urlpatterns = [
    path("groupstore/groups", views.GroupListView.as_view(), name="groups"),
    path("groupstore/groups/<str:group_id>", views.GroupDetailView.as_view(), name="group"),
    path(
        "groups/pending-approvals",
        approval_views.AllGroupsPendingApprovalsView.as_view(),
        name="groups-pending-approvals",
    ),
    path(
        "groups/<str:group_id>/conversations",
        discussion_views.DiscussionListView.as_view(),
        name="group-discussions",
    ),
    # before D, which would take "stream" or "pending-approvals" for a discussion id
    path(
        "groups/<str:group_id>/conversations/stream",
        stream_views.DiscussionStartStreamView.as_view(),
        name="group-discussions-stream",
    ),
    path(
        "groups/<str:group_id>/conversations/pending-approvals",
        approval_views.GroupPendingApprovalsView.as_view(),
        name="group-pending-approvals",
    ),
    path(D, discussion_views.DiscussionView.as_view(), name="group-discussion"),
    path(f"{D}/approve", discussion_views.DiscussionApproveView.as_view(), name="group-discussion-approve"),
    path(
        f"{D}/approve/stream",
        stream_views.DiscussionApproveStreamView.as_view(),
        name="group-discussion-approve-stream",
    ),
    path(f"{D}/cancel", discussion_views.DiscussionCancelView.as_view(), name="group-discussion-cancel"),
    path(
        f"{D}/approval-status",
        approval_views.DiscussionApprovalStatusView.as_view(),
        name="group-discussion-approval-status",
    ),
]
