"""/schedulestore/schedules: who may do what, and HITL timers protected on every operation."""

from __future__ import annotations

import datetime
import uuid

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.conf import croniter
from django_q.models import OrmQ, Schedule
from django_q.scheduler import scheduler

from harnesses.users import client_for, make_user
from schedules.protection import (
    claims_hitl,
    hitl_schedules_filter,
    is_hitl_schedule,
    is_hitl_timer,
)
from schedules.selectors import visible_schedules

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.schedules.schedule_test_urls")]

URL = "/schedulestore/schedules"
NOOP = "approvals.maintenance_tasks.noop"
ROLES = ["anonymous", "user", "staff", "approver", "admin"]
STAFF_ROLES = ["staff", "approver", "admin"]
OUTPUT_KEYS = {
    "id",
    "name",
    "func",
    "args",
    "kwargs",
    "scheduleType",
    "minutes",
    "cron",
    "repeats",
    "nextRun",
    "enabled",
    "isHitlTimer",
}


def hitl_timer(pause_id: uuid.UUID | None = None, **changes) -> Schedule:
    """A schedule shaped like approvals.timer_arming.arm_timer makes it."""
    pause_id = pause_id or uuid.uuid4()
    fields = {
        "name": f"hitl-timeout-{pause_id}",
        "func": "approvals.timers.fire_timeout",
        "args": repr(str(pause_id)),
        "schedule_type": Schedule.ONCE,
        "repeats": 1,
        "next_run": timezone.now() + datetime.timedelta(hours=1),
        **changes,
    }
    return Schedule.objects.create(**fields)


def plain_schedule(**changes) -> Schedule:
    fields = {
        "name": "nightly-noop",
        "func": NOOP,
        "args": "1, 'two'",
        "schedule_type": Schedule.DAILY,
        "repeats": -1,
        "next_run": timezone.now() + datetime.timedelta(hours=2),
        **changes,
    }
    return Schedule.objects.create(**fields)


def client_as(role: str):
    if role == "anonymous":
        return client_for(None)
    username = f"{role}-1"
    return client_for(User.objects.filter(username=username).first() or make_user(username, role))


def enqueued(func: str) -> list[dict]:
    return [queued.task for queued in OrmQ.objects.all() if queued.task.get("func") == func]


# --- the role × operation matrix --------------------------------------------------------------------

OPERATIONS = ["list", "detail", "update", "delete", "enable", "disable", "fire"]


def perform(client, operation: str, schedule: Schedule):
    item = f"{URL}/{schedule.pk}"
    if operation == "list":
        return client.get(URL)
    if operation == "detail":
        return client.get(item)
    if operation == "update":
        later = (timezone.now() + datetime.timedelta(days=3)).isoformat()
        return client.put(item, {"nextRun": later}, format="json")
    if operation == "delete":
        return client.delete(item)
    if operation in ("enable", "disable", "fire"):
        return client.post(f"{item}/{operation}", format="json")
    raise AssertionError(operation)


OK = {"list": 200, "detail": 200, "update": 200, "delete": 204, "enable": 200, "disable": 200, "fire": 202}
EXPECTED_ON_PLAIN = {
    "anonymous": dict.fromkeys(OPERATIONS, 401),
    "user": dict.fromkeys(OPERATIONS, 403),
    "staff": OK,
    "approver": OK,
    "admin": OK,
}
NON_ADMIN_ON_TIMER = {
    "list": 200,
    "detail": 404,
    "update": 403,
    "delete": 403,
    "enable": 403,
    "disable": 403,
    "fire": 409,
}
EXPECTED_ON_TIMER = {
    "anonymous": dict.fromkeys(OPERATIONS, 401),
    "user": dict.fromkeys(OPERATIONS, 403),
    "staff": NON_ADMIN_ON_TIMER,
    "approver": NON_ADMIN_ON_TIMER,
    "admin": {**OK, "fire": 409},
}


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("role", ROLES)
def test_role_matrix_on_a_plain_schedule(role, operation):
    schedule = plain_schedule()
    response = perform(client_as(role), operation, schedule)
    assert response.status_code == EXPECTED_ON_PLAIN[role][operation], response.content
    if operation == "list" and response.status_code == 200:
        assert schedule.pk in {item["id"] for item in response.json()}


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("role", ROLES)
def test_role_matrix_on_a_hitl_timer(role, operation):
    timer = hitl_timer()
    response = perform(client_as(role), operation, timer)
    assert response.status_code == EXPECTED_ON_TIMER[role][operation], response.content
    if response.status_code >= 400:
        assert response["Content-Type"].startswith("application/problem+json")
    if operation == "list" and response.status_code == 200:
        listed = {item["id"] for item in response.json()}
        assert (timer.pk in listed) is (role == "admin")
    if operation in ("update", "delete", "enable", "disable", "fire") and role != "admin":
        after = Schedule.objects.get(pk=timer.pk)
        assert (after.repeats, after.next_run) == (timer.repeats, timer.next_run)
    if operation == "fire":
        assert enqueued("approvals.timers.fire_timeout") == []


@pytest.mark.parametrize("role", ROLES)
def test_create_is_for_staff_and_admins(role):
    response = client_as(role).post(URL, {"func": NOOP, "scheduleType": "HOURLY"}, format="json")
    expected = {"anonymous": 401, "user": 403}.get(role, 201)
    assert response.status_code == expected, response.content


# --- reading --------------------------------------------------------------------------------------


def test_listing_shows_every_field_and_marks_the_timer_for_admins(admin_client):
    timer = hitl_timer()
    plain = plain_schedule()
    body = {item["id"]: item for item in admin_client.get(URL).json()}
    assert set(body[timer.pk]) == OUTPUT_KEYS
    assert body[timer.pk]["isHitlTimer"] is True
    assert body[timer.pk]["enabled"] is True
    assert body[timer.pk]["scheduleType"] == "ONCE"
    assert body[timer.pk]["args"] == timer.args
    assert body[plain.pk]["isHitlTimer"] is False
    assert body[plain.pk]["scheduleType"] == "DAILY"


def test_hitl_timers_and_hitl_jobs_are_invisible_to_staff_non_admins():
    timer = hitl_timer()
    drain = Schedule.objects.create(
        name="hitl-timer-drain-x", func="approvals.timers.drain_due_timers", schedule_type=Schedule.MINUTES
    )
    marked = Schedule.objects.create(name="odd", func=NOOP, kwargs="note='hitl_timeout'")
    plain = plain_schedule()
    staff = client_as("staff")
    listed = {item["id"] for item in staff.get(URL).json()}
    assert plain.pk in listed
    assert not listed & {timer.pk, drain.pk, marked.pk}
    for hidden in (timer, drain, marked):
        assert staff.get(f"{URL}/{hidden.pk}").status_code == 404


def test_an_unknown_id_is_404_for_staff_and_403_for_a_plain_user():
    assert client_as("staff").get(f"{URL}/999999").status_code == 404
    assert client_as("staff").put(f"{URL}/999999", {}, format="json").status_code == 404
    assert client_as("user").get(f"{URL}/999999").status_code == 403


# --- firing ---------------------------------------------------------------------------------------


def test_a_hitl_timer_is_never_fired_by_hand_not_even_by_an_admin(admin_client):
    timer = hitl_timer(next_run=timezone.now() - datetime.timedelta(minutes=5))
    response = admin_client.post(f"{URL}/{timer.pk}/fire")
    assert response.status_code == 409
    problem = response.json()
    assert problem["code"] == "WRONG_STATE"
    assert "/resume" in problem["detail"] and "/cancel" in problem["detail"]
    assert enqueued("approvals.timers.fire_timeout") == []
    assert Schedule.objects.get(pk=timer.pk).repeats == 1


def test_a_schedule_named_like_a_timer_is_a_timer_whatever_its_function(admin_client):
    named = Schedule.objects.create(name="hitl-timeout-abc", func=NOOP)
    by_func = Schedule.objects.create(name="renamed", func="approvals.timers.fire_timeout", args="'x'")
    for schedule in (named, by_func):
        assert admin_client.post(f"{URL}/{schedule.pk}/fire").status_code == 409


def test_firing_a_plain_schedule_queues_its_function_now_and_leaves_its_timing(approver_client):
    schedule = plain_schedule(kwargs="greeting='hi'")
    response = approver_client.post(f"{URL}/{schedule.pk}/fire")
    assert response.status_code == 202
    [task] = enqueued(NOOP)
    assert response.json() == {"scheduleId": schedule.pk, "taskId": task["id"]}
    assert task["args"] == (1, "two")
    assert task["kwargs"] == {"greeting": "hi"}
    assert task["group"] == "nightly-noop"
    after = Schedule.objects.get(pk=schedule.pk)
    assert (after.repeats, after.next_run) == (schedule.repeats, schedule.next_run)


def test_firing_never_passes_stored_task_options_to_django_q(admin_client):
    schedule = plain_schedule(kwargs="{'hook': 'os.system', 'chain': [('os.system', ('true',))], 'x': 1}")
    assert admin_client.post(f"{URL}/{schedule.pk}/fire").status_code == 202
    [task] = enqueued(NOOP)
    assert task["kwargs"] == {"x": 1}
    assert "hook" not in task and "chain" not in task


def test_other_hitl_jobs_are_fired_by_admins_only():
    job = Schedule.objects.create(
        name="hitl-recovery-x", func="approvals.recovery.run_recovery", schedule_type=Schedule.MINUTES
    )
    assert client_as("staff").post(f"{URL}/{job.pk}/fire").status_code == 403
    assert client_as("admin").post(f"{URL}/{job.pk}/fire").status_code == 202


# --- creating -------------------------------------------------------------------------------------


def test_create_stores_a_schedule_django_q_can_run():
    client = client_as("staff")
    run_at = timezone.now() + datetime.timedelta(minutes=30)
    response = client.post(
        URL,
        {
            "name": "every-five",
            "func": NOOP,
            "args": "'a', 2",
            "kwargs": "flag=True",
            "scheduleType": "MINUTES",
            "minutes": 5,
            "nextRun": run_at.isoformat(),
            "repeats": 10,
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    stored = Schedule.objects.get(pk=body["id"])
    assert (stored.func, stored.args, stored.kwargs) == (NOOP, "'a', 2", "flag=True")
    assert (stored.schedule_type, stored.minutes, stored.repeats) == (Schedule.MINUTES, 5, 10)
    assert stored.next_run == run_at
    assert stored.hook is None
    assert body["enabled"] is True and body["isHitlTimer"] is False


def test_create_defaults_to_a_once_schedule_running_now(admin_client):
    before = timezone.now()
    body = admin_client.post(URL, {"func": NOOP}, format="json").json()
    assert body["scheduleType"] == "ONCE"
    assert body["repeats"] == -1
    assert before <= datetime.datetime.fromisoformat(body["nextRun"]) <= timezone.now()


CLAIMS = [
    {"name": "hitl-timeout-1b9e0d52-8f57-4d8e-9d7a-0bd0d1b4b0aa"},
    {"name": "  HITL-Timeout-x"},
    {"name": "hitl-anything"},
    {"func": "approvals.timers.fire_timeout", "args": "'x'"},
    {"func": "approvals.recovery.run_recovery"},
    {"kwargs": "hitlType='hitl_timeout'"},
    {"metadata": {"hitlType": "hitl_timeout"}},
]


@pytest.mark.parametrize("claim", CLAIMS)
@pytest.mark.parametrize("role", STAFF_ROLES)
def test_a_body_that_claims_hitl_is_refused_for_everyone(role, claim):
    before = Schedule.objects.count()
    response = client_as(role).post(URL, {"func": NOOP, **claim}, format="json")
    assert response.status_code == 400, response.content
    assert set(claim) & {error["field"] for error in response.json()["errors"]}
    assert Schedule.objects.count() == before


@pytest.mark.parametrize(
    "func", ["os.system", "subprocess.run", "builtins.eval", "approvals.timer_arming.arm_timer"]
)
def test_a_function_off_the_allow_list_is_refused_even_for_admins(admin_client, func):
    response = admin_client.post(URL, {"func": func, "args": "'id'"}, format="json")
    assert response.status_code == 400
    assert "func" in {error["field"] for error in response.json()["errors"]}


@override_settings(HITL_SCHEDULABLE_FUNCTIONS=["tests.schedules.test_schedule_protection.enqueued"])
def test_the_allow_list_is_a_setting(admin_client):
    assert admin_client.post(URL, {"func": NOOP}, format="json").status_code == 400
    allowed = {"func": "tests.schedules.test_schedule_protection.enqueued", "args": "'x'"}
    assert admin_client.post(URL, allowed, format="json").status_code == 201


@pytest.mark.parametrize(
    "option", ["hook='os.system'", "chain=[('os.system', ('id',))]", "q_options={'sync': True}"]
)
def test_kwargs_may_not_carry_task_options(admin_client, option):
    response = admin_client.post(URL, {"func": NOOP, "kwargs": option}, format="json")
    assert response.status_code == 400
    assert "kwargs" in {error["field"] for error in response.json()["errors"]}


def test_every_problem_of_a_body_is_reported_at_once(admin_client):
    response = admin_client.post(
        URL,
        {
            "func": "os.system",
            "args": "__import__('os')",
            "scheduleType": "MINUTES",
            "nextRun": "tomorrow",
            "repeats": -5,
            "colour": "blue",
        },
        format="json",
    )
    assert response.status_code == 400
    problem = response.json()
    fields = {error["field"] for error in problem["errors"]}
    assert fields == {"func", "args", "minutes", "nextRun", "repeats", "colour"}
    assert all(f"{field}: " in problem["detail"] for field in fields)


@pytest.mark.parametrize("kind", ["BIWEEKLY", "SOMETIMES", ""])
def test_only_the_documented_schedule_types_are_accepted(admin_client, kind):
    response = admin_client.post(URL, {"func": NOOP, "scheduleType": kind}, format="json")
    assert response.status_code == 400
    assert {error["field"] for error in response.json()["errors"]} == {"scheduleType"}


def test_a_cron_schedule_needs_a_valid_expression(admin_client):
    missing = admin_client.post(URL, {"func": NOOP, "scheduleType": "CRON"}, format="json")
    assert missing.status_code == 400
    assert {error["field"] for error in missing.json()["errors"]} == {"cron"}
    response = admin_client.post(
        URL, {"func": NOOP, "scheduleType": "CRON", "cron": "0 3 * * *"}, format="json"
    )
    if croniter is None:
        assert response.status_code == 400
        assert "croniter" in response.json()["detail"]
    else:
        assert response.status_code == 201
        assert response.json()["cron"] == "0 3 * * *"


def test_an_update_may_keep_an_older_schedule_type(admin_client):
    schedule = plain_schedule(schedule_type=Schedule.BIWEEKLY)
    body = admin_client.get(f"{URL}/{schedule.pk}").json()
    assert body["scheduleType"] == "BIWEEKLY"
    assert admin_client.put(f"{URL}/{schedule.pk}", body, format="json").status_code == 200
    other = plain_schedule(name="other")
    assert (
        admin_client.put(f"{URL}/{other.pk}", {"scheduleType": "BIWEEKLY"}, format="json").status_code == 400
    )


def test_a_body_must_be_an_object(admin_client):
    assert admin_client.post(URL, [{"func": NOOP}], format="json").status_code == 400


def test_names_are_unique(admin_client):
    plain_schedule()
    response = admin_client.post(URL, {"func": NOOP, "name": "nightly-noop"}, format="json")
    assert response.status_code == 400
    assert {error["field"] for error in response.json()["errors"]} == {"name"}


# --- updating -------------------------------------------------------------------------------------


def test_an_update_keeps_the_fields_it_leaves_out(approver_client):
    schedule = plain_schedule()
    response = approver_client.put(f"{URL}/{schedule.pk}", {"args": "3"}, format="json")
    assert response.status_code == 200
    after = Schedule.objects.get(pk=schedule.pk)
    assert (after.args, after.name, after.func, after.schedule_type) == (
        "3",
        "nightly-noop",
        NOOP,
        Schedule.DAILY,
    )


def test_a_get_body_can_be_put_back(admin_client):
    schedule = plain_schedule()
    body = admin_client.get(f"{URL}/{schedule.pk}").json()
    assert admin_client.put(f"{URL}/{schedule.pk}", body, format="json").status_code == 200


@pytest.mark.parametrize("claim", CLAIMS)
def test_an_update_may_not_make_a_schedule_hitl_even_for_admins(admin_client, claim):
    schedule = plain_schedule()
    response = admin_client.put(f"{URL}/{schedule.pk}", claim, format="json")
    assert response.status_code == 400, response.content
    after = Schedule.objects.get(pk=schedule.pk)
    assert (after.name, after.func, after.kwargs) == (schedule.name, schedule.func, schedule.kwargs)


def test_an_admin_may_change_a_hitl_timer_and_it_stays_a_timer(admin_client):
    timer = hitl_timer()
    later = timezone.now() + datetime.timedelta(days=1)
    response = admin_client.put(f"{URL}/{timer.pk}", {"nextRun": later.isoformat()}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["isHitlTimer"] is True
    assert Schedule.objects.get(pk=timer.pk).next_run == later


def test_staff_may_not_swap_the_function_of_a_code_registered_schedule():
    job = Schedule.objects.create(name="reports", func="django.core.management.call_command", args="'check'")
    response = client_as("staff").put(f"{URL}/{job.pk}", {"args": "'flush', '--noinput'"}, format="json")
    assert response.status_code == 400
    assert {error["field"] for error in response.json()["errors"]} == {"func"}
    assert (
        client_as("admin").put(f"{URL}/{job.pk}", {"args": "'check', '--deploy'"}, format="json").status_code
        == 200
    )


# --- enable, disable, delete ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # django-q2's scheduler closes the connection it finds
def test_disable_keeps_the_row_and_the_scheduler_skips_it(admin_client):
    schedule = plain_schedule(
        next_run=timezone.now() - datetime.timedelta(minutes=1), schedule_type=Schedule.ONCE
    )
    response = admin_client.post(f"{URL}/{schedule.pk}/disable")
    assert response.status_code == 200
    assert response.json()["enabled"] is False
    assert Schedule.objects.get(pk=schedule.pk).repeats == 0
    scheduler(get_broker())
    assert enqueued(NOOP) == []

    enabled = admin_client.post(f"{URL}/{schedule.pk}/enable").json()
    assert (enabled["enabled"], enabled["repeats"]) == (True, 1)
    scheduler(get_broker())
    assert len(enqueued(NOOP)) == 1
    assert Schedule.objects.get(pk=schedule.pk).repeats == 0  # ran once, row kept


def test_enable_restores_forever_for_recurring_schedules_or_the_count_given(admin_client):
    schedule = plain_schedule(repeats=0)
    assert admin_client.post(f"{URL}/{schedule.pk}/enable").json()["repeats"] == -1
    assert (
        admin_client.post(f"{URL}/{schedule.pk}/enable", {"repeats": 3}, format="json").json()["repeats"] == 3
    )
    for bad in (0, -2, "3", True):
        response = admin_client.post(f"{URL}/{schedule.pk}/enable", {"repeats": bad}, format="json")
        assert response.status_code == 400


@pytest.mark.parametrize("body", [[], [{"repeats": 3}], "3", 7])
def test_enable_with_a_body_that_is_not_an_object_sets_no_count(admin_client, body):
    # a JSON list body must not reach validate_repeats, which reads it as a dict (a 500)
    schedule = plain_schedule(repeats=0)
    response = admin_client.post(f"{URL}/{schedule.pk}/enable", body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["repeats"] == -1


def test_an_admin_may_delete_a_hitl_timer(admin_client):
    timer = hitl_timer()
    assert admin_client.delete(f"{URL}/{timer.pk}").status_code == 204
    assert not Schedule.objects.filter(pk=timer.pk).exists()


# --- the recognition rule -------------------------------------------------------------------------


def test_a_timer_the_core_arms_is_a_hitl_timer_hidden_from_staff():
    from approvals.models import Pause, PauseStatus
    from approvals.timer_arming import arm_timer

    pause = Pause(status=PauseStatus.PENDING, due_at=timezone.now() + datetime.timedelta(hours=1))
    timer = arm_timer(pause, unsaved=True)
    assert is_hitl_timer(timer) and is_hitl_schedule(timer)
    assert not visible_schedules(make_user("staff-armed", "staff")).filter(pk=timer.pk).exists()


def test_the_service_own_periodic_schedules_are_hitl_schedules():
    from approvals.recovery import ensure_maintenance_schedules
    from approvals.timers import ensure_timer_schedules

    ensure_timer_schedules()
    ensure_maintenance_schedules()
    own = Schedule.objects.filter(name__startswith="hitl-")
    assert own.exists()
    assert all(is_hitl_schedule(schedule) and not is_hitl_timer(schedule) for schedule in own)


RULE_CORPUS = [
    ("hitl-timeout-x", NOOP, None, True, True),
    ("HITL-TIMEOUT-x", NOOP, None, True, True),
    ("other", "approvals.timers.fire_timeout", None, True, True),
    ("hitl-timer-drain", "approvals.timers.drain_due_timers", None, False, True),
    ("x", "approvals.recovery.run_recovery", None, False, True),
    ("hitl-x", NOOP, None, False, True),
    ("x", NOOP, "note='HITLTYPE'", False, True),
    ("x", NOOP, None, False, False),
    ("x", "approvals.maintenance_tasks.clear_expired_sessions", None, False, False),
    (None, "myapp.tasks.job", "days=3", False, False),
    ("xhitl-timeout-", "myapp.approvals.thing", None, False, False),
]


@pytest.mark.parametrize(("name", "func", "kwargs", "timer", "hitl"), RULE_CORPUS)
def test_the_python_rule_and_the_database_filter_agree(name, func, kwargs, timer, hitl):
    schedule = Schedule.objects.create(name=name, func=func, kwargs=kwargs)
    assert is_hitl_timer(schedule) is timer
    assert is_hitl_schedule(schedule) is hitl
    assert Schedule.objects.filter(hitl_schedules_filter(), pk=schedule.pk).exists() is hitl
    staff = make_user("staff-rule", "staff")
    assert visible_schedules(staff).filter(pk=schedule.pk).exists() is not hitl


def test_claims_look_through_case_blanks_and_metadata():
    assert claims_hitl({"name": " Hitl-Timeout-1"})
    assert claims_hitl({"func": " approvals.timers.fire_timeout "})
    assert claims_hitl({"metadata": {"hitlType": "other"}})
    assert claims_hitl({"kwargs": {"policy": "hitl_timeout"}})
    assert not claims_hitl({"name": "nightly", "func": NOOP, "kwargs": "days=3"})
