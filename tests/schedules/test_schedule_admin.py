"""The Django admin of django-q2's schedules and tasks, with HITL timers protected."""

from __future__ import annotations

import datetime
import uuid

import pytest
from django.test import Client
from django.utils import timezone
from django_q.models import Failure, OrmQ, Schedule, Task

from harnesses.users import make_user
from schedules.admin import ProtectedScheduleAdmin
from tests.schedules.test_schedule_protection import NOOP, hitl_timer, plain_schedule

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.schedules.schedule_test_urls")]

CHANGELIST = "/admin/django_q/schedule/"
ADD = "/admin/django_q/schedule/add/"


def browser(role: str) -> Client:
    client = Client()
    client.force_login(make_user(f"{role}-admin-ui", role))
    return client


def form_data(**changes) -> dict[str, str]:
    run_at = timezone.now() + datetime.timedelta(hours=1)
    return {
        "name": "from-the-admin",
        "func": NOOP,
        "args": "",
        "kwargs": "",
        "schedule_type": Schedule.ONCE,
        "minutes": "",
        "repeats": "-1",
        "next_run_0": run_at.strftime("%Y-%m-%d"),
        "next_run_1": run_at.strftime("%H:%M:%S"),
        "cron": "",
        "cluster": "",
        "intended_date_kwarg": "",
        **changes,
    }


def failed_task(*, func: str, group: str, args: tuple) -> Task:
    return Task.objects.create(
        id=uuid.uuid4().hex,
        name="task-" + uuid.uuid4().hex[:6],
        func=func,
        args=args,
        kwargs={},
        group=group,
        started=timezone.now(),
        stopped=timezone.now(),
        success=False,
    )


def test_our_admin_replaces_django_q2s():
    from django.contrib import admin

    assert isinstance(admin.site._registry[Schedule], ProtectedScheduleAdmin)


# --- staff who are not admins ---------------------------------------------------------------------


@pytest.mark.parametrize("role", ["staff", "approver"])
def test_the_changelist_hides_hitl_timers_from_staff(role):
    timer = hitl_timer()
    plain = plain_schedule()
    response = browser(role).get(CHANGELIST)
    assert response.status_code == 200
    shown = {schedule.pk for schedule in response.context["cl"].result_list}
    assert plain.pk in shown
    assert timer.pk not in shown
    assert timer.name not in response.content.decode()


def test_a_hitl_timer_change_page_is_404_for_staff_like_a_missing_one():
    timer = hitl_timer()
    staff = browser("staff")
    assert staff.get(f"{CHANGELIST}{timer.pk}/change/").status_code == 404
    assert staff.get(f"{CHANGELIST}999999/change/").status_code == 404
    assert staff.get(f"{CHANGELIST}{timer.pk}/history/").status_code == 404
    assert staff.post(f"{CHANGELIST}{timer.pk}/change/", form_data(name=timer.name)).status_code == 404


def test_staff_cannot_delete_a_hitl_timer_one_by_one_or_in_bulk():
    timer = hitl_timer()
    staff = browser("staff")
    assert staff.post(f"{CHANGELIST}{timer.pk}/delete/", {"post": "yes"}).status_code == 404
    staff.post(CHANGELIST, {"action": "delete_selected", "_selected_action": [timer.pk], "post": "yes"})
    assert Schedule.objects.filter(pk=timer.pk).exists()


def test_staff_can_change_and_delete_a_plain_schedule():
    plain = plain_schedule()
    staff = browser("staff")
    assert staff.get(f"{CHANGELIST}{plain.pk}/change/").status_code == 200
    response = staff.post(f"{CHANGELIST}{plain.pk}/change/", form_data(name="renamed", args="5"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Schedule.objects.get(pk=plain.pk).name == "renamed"
    assert staff.post(f"{CHANGELIST}{plain.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Schedule.objects.filter(pk=plain.pk).exists()


def test_a_plain_user_is_sent_to_the_login_page():
    assert browser("user").get(CHANGELIST).status_code == 302


# --- the add and change forms ---------------------------------------------------------------------


@pytest.mark.parametrize("role", ["staff", "approver"])
def test_reviewers_are_offered_no_add_and_may_not_add(role):
    """Approvers and other staff see "Scheduled tasks" without "+ Add", and the add page refuses them."""
    client = browser(role)
    for listing in (client.get("/admin/").content.decode(), client.get(CHANGELIST).content.decode()):
        assert f'href="{CHANGELIST}"' in listing
        assert f'href="{ADD}"' not in listing
    assert client.get(ADD).status_code == 403
    assert client.post(ADD, form_data()).status_code == 403
    assert not Schedule.objects.filter(name="from-the-admin").exists()


def test_an_admin_is_offered_add():
    assert f'href="{ADD}"' in browser("admin").get("/admin/").content.decode()


@pytest.mark.parametrize(
    "claim",
    [
        {"name": "hitl-timeout-abc"},
        {"name": "HITL-drain"},
        {"func": "approvals.timers.fire_timeout", "args": "'abc'"},
        {"kwargs": "hitlType='hitl_timeout'"},
    ],
)
def test_the_add_form_refuses_a_hitl_claiming_schedule_even_for_an_admin(claim):
    response = browser("admin").post(ADD, form_data(**claim))
    assert response.status_code == 200  # the form again, with errors
    assert response.context["adminform"].form.errors
    assert not Schedule.objects.filter(name=form_data(**claim)["name"]).exists()


@pytest.mark.parametrize("changes", [{"func": "os.system", "args": "'id'"}, {"kwargs": "hook='os.system'"}])
def test_the_add_form_keeps_to_the_allow_list(changes):
    response = browser("admin").post(ADD, form_data(**changes))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors
    assert not Schedule.objects.filter(name="from-the-admin").exists()


def test_the_add_form_creates_an_allowed_schedule_without_a_hook():
    response = browser("admin").post(ADD, form_data(hook="os.system"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    created = Schedule.objects.get(name="from-the-admin")
    assert (created.func, created.hook) == (NOOP, None)


def test_an_update_may_not_turn_a_plain_schedule_into_a_hitl_one():
    plain = plain_schedule()
    response = browser("admin").post(f"{CHANGELIST}{plain.pk}/change/", form_data(name="hitl-timeout-x"))
    assert response.status_code == 200
    assert Schedule.objects.get(pk=plain.pk).name == "nightly-noop"


# --- admins ---------------------------------------------------------------------------------------


def test_an_admin_sees_changes_and_deletes_hitl_timers():
    timer = hitl_timer()
    admin = browser("admin")
    assert timer.pk in {schedule.pk for schedule in admin.get(CHANGELIST).context["cl"].result_list}
    assert admin.get(f"{CHANGELIST}{timer.pk}/change/").status_code == 200
    later = timezone.now() + datetime.timedelta(days=2)
    response = admin.post(
        f"{CHANGELIST}{timer.pk}/change/",
        form_data(
            name=timer.name,
            func=timer.func,
            args=timer.args,
            repeats="1",
            next_run_0=later.strftime("%Y-%m-%d"),
            next_run_1=later.strftime("%H:%M:%S"),
        ),
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Schedule.objects.get(pk=timer.pk).next_run.date() == later.date()
    assert admin.post(f"{CHANGELIST}{timer.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Schedule.objects.filter(pk=timer.pk).exists()


def test_the_schedule_admin_has_no_action_that_runs_a_schedule():
    actions = browser("admin").get(CHANGELIST).context["action_form"].fields["action"].choices
    assert [name for name, _ in actions if name] == ["delete_selected"]


# --- task results and the queue -------------------------------------------------------------------


@pytest.mark.parametrize(
    "page", ["/admin/django_q/success/", "/admin/django_q/failure/", "/admin/django_q/ormq/"]
)
def test_task_results_and_the_queue_are_for_admins_only(page):
    assert browser("staff").get(page).status_code == 403
    assert browser("approver").get(page).status_code == 403
    assert browser("admin").get(page).status_code == 200


def test_the_admin_index_shows_staff_the_schedules_only():
    index = browser("staff").get("/admin/").content.decode()
    assert "/admin/django_q/schedule/" in index
    assert "/admin/django_q/failure/" not in index
    assert "/admin/django_q/success/" not in index


def test_resubmitting_never_fires_a_hitl_timer_task_by_hand():
    pause_id = str(uuid.uuid4())
    timer_task = failed_task(
        func="approvals.timers.fire_timeout", group=f"hitl-timeout-{pause_id}", args=(pause_id,)
    )
    other = failed_task(func=NOOP, group="nightly-noop", args=(1,))
    response = browser("admin").post(
        "/admin/django_q/failure/",
        {"action": "resubmit_tasks", "_selected_action": [timer_task.pk, other.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert "never fired by hand" in response.content.decode()
    queued = [entry.task["func"] for entry in OrmQ.objects.all()]
    assert queued == [NOOP]
    assert Failure.objects.filter(pk=timer_task.pk).exists()
