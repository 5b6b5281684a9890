from django.urls import path

from schedules.api.views import (
    ScheduleDetailView,
    ScheduleDisableView,
    ScheduleEnableView,
    ScheduleFireView,
    ScheduleListView,
)

urlpatterns = [
    path("schedulestore/schedules", ScheduleListView.as_view(), name="schedules"),
    path("schedulestore/schedules/<int:schedule_id>", ScheduleDetailView.as_view(), name="schedule"),
    path(
        "schedulestore/schedules/<int:schedule_id>/enable",
        ScheduleEnableView.as_view(),
        name="schedule-enable",
    ),
    path(
        "schedulestore/schedules/<int:schedule_id>/disable",
        ScheduleDisableView.as_view(),
        name="schedule-disable",
    ),
    path("schedulestore/schedules/<int:schedule_id>/fire", ScheduleFireView.as_view(), name="schedule-fire"),
]
