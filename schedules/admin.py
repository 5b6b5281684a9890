"""django-q2's admin pages, with HITL's own schedules and tasks protected.

django-q2 registers plain admins for Schedule, Success, Failure and OrmQ (queued tasks). We replace them:

- Schedules: staff see and change non-HITL schedules, only admins add them here; HITL schedules are listed to admins only, a
  hidden one answers 404 (no existence oracle), and only admins change or delete them. No form may
  make a schedule HITL's, and ``func`` must be on the allow-list (schedules.protection).
- Successful and failed tasks and the queue show task arguments (a timer's pause id) and can resubmit
  a task — for a timer's task that would fire it by hand. They are for admins only, and resubmitting
  skips a HITL timer's tasks even for admins.
"""

from __future__ import annotations

from typing import Any

import django_q.admin as q_admin  # registers django-q2's own admins first, so we can replace them
from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import Http404, HttpRequest
from django_q.conf import croniter
from django_q.models import Failure, OrmQ, Schedule, Success

from approvals.access import is_admin
from schedules.protection import (
    is_hitl_schedule,
    is_hitl_timer_task,
    may_change,
    may_use_schedule_store,
    schedule_problems,
)
from schedules.selectors import schedule_by_id, visible_schedules


class ProtectedScheduleForm(forms.ModelForm):
    user: Any = None  # set per request by ProtectedScheduleAdmin.get_form

    class Meta:
        model = Schedule
        # hook is shown read-only: a result hook is a function call that would bypass the allow-list.
        fields = [
            "name",
            "func",
            "args",
            "kwargs",
            "schedule_type",
            "minutes",
            "repeats",
            "next_run",
            "cron",
            "cluster",
            "intended_date_kwarg",
        ]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        before = schedule_by_id(self.instance.pk)
        for field, message in schedule_problems(user=self.user, before=before, data=cleaned):
            if field in self.errors:
                continue  # already reported by the field itself
            self.add_error(field if field in self.fields else None, message)
        if (
            cleaned.get("schedule_type") == Schedule.CRON
            and croniter is None
            and "schedule_type" not in self.errors
        ):
            self.add_error(
                "schedule_type", "Cron schedules need the croniter package, which is not installed."
            )
        return cleaned


class ProtectedScheduleAdmin(q_admin.ScheduleAdmin):
    form = ProtectedScheduleForm

    def get_queryset(self, request: HttpRequest) -> QuerySet[Schedule]:
        visible = visible_schedules(request.user).values("pk")
        return super().get_queryset(request).filter(pk__in=visible)

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Schedule:
        # Missing and hidden look the same: 404 (django's default would redirect with a message).
        schedule = super().get_object(request, object_id, from_field)
        if schedule is None:
            raise Http404("Schedule not found.")
        return schedule

    def get_readonly_fields(self, request: HttpRequest, obj: Schedule | None = None) -> list[str]:
        return [*super().get_readonly_fields(request, obj), "hook"]

    def get_form(
        self, request: HttpRequest, obj: Schedule | None = None, change: bool = False, **kwargs: Any
    ):
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"user": request.user})

    def has_module_permission(self, request: HttpRequest) -> bool:
        return may_use_schedule_store(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        if not may_use_schedule_store(request.user):
            return False
        return obj is None or is_admin(request.user) or not is_hitl_schedule(obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Reviewers (approvers, staff) work in the inbox: an "+ Add" they would use by mistake is not
        # offered. Admins add schedules here; the REST schedule store keeps its own rule.
        return is_admin(request.user)

    def has_change_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        if obj is None:
            return may_use_schedule_store(request.user)
        return may_change(request.user, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        return self.has_change_permission(request, obj)


@admin.action(description="Resubmit selected tasks to queue (never a HITL timer's)")
def resubmit_tasks(model_admin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> None:
    tasks = list(queryset)
    timers = [task for task in tasks if is_hitl_timer_task(task)]
    if timers:
        model_admin.message_user(
            request,
            f"{len(timers)} HITL timer task(s) not resubmitted: a timer is never fired by hand. "
            "Decide the pause with resume or cancel instead.",
            messages.ERROR,
        )
    q_admin.resubmit_task(model_admin, request, [task for task in tasks if not is_hitl_timer_task(task)])


class AdminsOnly:
    """Task results and the queue carry task arguments; only admins see them."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return is_admin(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_admin(request.user)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_admin(request.user)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_admin(request.user)


class ProtectedSuccessAdmin(AdminsOnly, q_admin.TaskAdmin):
    actions = [resubmit_tasks]


class ProtectedFailureAdmin(AdminsOnly, q_admin.FailAdmin):
    actions = [resubmit_tasks]


class ProtectedQueueAdmin(AdminsOnly, q_admin.QueueAdmin):
    pass


def _replace(model: type, model_admin: type[admin.ModelAdmin]) -> None:
    if admin.site.is_registered(model):
        admin.site.unregister(model)
        admin.site.register(model, model_admin)


_replace(Schedule, ProtectedScheduleAdmin)
_replace(Success, ProtectedSuccessAdmin)
_replace(Failure, ProtectedFailureAdmin)
_replace(OrmQ, ProtectedQueueAdmin)  # django-q2 registers the queue only for the ORM broker
