from django.urls import path

from groups.api import views

urlpatterns = [
    path("groupstore/groups", views.GroupListView.as_view(), name="groups"),
    path("groupstore/groups/<str:group_id>", views.GroupDetailView.as_view(), name="group"),
]
