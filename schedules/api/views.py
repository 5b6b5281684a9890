"""/schedulestore/schedules: django-q2 schedules for staff and admins, with HITL's own schedules protected.

Who may do what is decided in schedules.protection and reads go through schedules.selectors; this
module validates bodies (ScheduleInputSerializer, the documented one), applies the change under a
row lock and renders the result.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db import transaction
from django.utils import timezone
from django_q.conf import croniter
from django_q.models import Schedule
from django_q.tasks import async_task
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.fields import SkipField
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.errors import Conflict, NotFound
from common.request_bodies import BodySerializer, validated_body
from schedules.protection import (
    TASK_OPTION_KEYWORDS,
    is_hitl_timer,
    may_use_schedule_store,
    parse_args,
    parse_kwargs,
    refuse_manual_fire,
    require_may_change,
    schedule_problems,
)
from schedules.selectors import (
    schedule_by_id,
    schedule_name_taken,
    schedules_by_next_run,
    visible_schedule,
)

TYPE_NAMES = {
    Schedule.ONCE: "ONCE",
    Schedule.MINUTES: "MINUTES",
    Schedule.HOURLY: "HOURLY",
    Schedule.DAILY: "DAILY",
    Schedule.WEEKLY: "WEEKLY",
    Schedule.BIWEEKLY: "BIWEEKLY",
    Schedule.MONTHLY: "MONTHLY",
    Schedule.BIMONTHLY: "BIMONTHLY",
    Schedule.QUARTERLY: "QUARTERLY",
    Schedule.YEARLY: "YEARLY",
    Schedule.CRON: "CRON",
}
TYPE_CODES = {name: code for code, name in TYPE_NAMES.items()}
CREATABLE_TYPES = ["ONCE", "MINUTES", "HOURLY", "DAILY", "WEEKLY", "CRON"]
READ_ONLY_FIELDS = {"id", "enabled", "isHitlTimer"}
NEW_SCHEDULE = {
    "name": None,
    "func": "",
    "args": None,
    "kwargs": None,
    "schedule_type": Schedule.ONCE,
    "minutes": None,
    "cron": None,
    "next_run": None,
    "repeats": -1,
}  # what a create starts from; an update starts from the row's own values of these fields


class ScheduleStoreUsers(BasePermission):
    """Staff and admins; plain users 403, anonymous 401."""

    message = "Access denied: only staff and admins may use the schedule store"

    def has_permission(self, request: Request, view: APIView) -> bool:
        return may_use_schedule_store(request.user)


# --- representation --------------------------------------------------------------------------------


class ScheduleOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField(allow_null=True)
    func = serializers.CharField(help_text="Dotted path of the function the schedule runs.")
    args = serializers.CharField(
        allow_null=True, help_text="Positional arguments as a Python literal, e.g. `1, 'two'`."
    )
    kwargs = serializers.CharField(
        allow_null=True, help_text="Keyword arguments, e.g. `days=30, name='x'` or a dict literal."
    )
    scheduleType = serializers.SerializerMethodField()
    minutes = serializers.IntegerField(allow_null=True, help_text="Interval of a MINUTES schedule.")
    cron = serializers.CharField(allow_null=True, help_text="Expression of a CRON schedule.")
    repeats = serializers.IntegerField(help_text="Runs left: -1 forever, 0 none (disabled or done), n times.")
    nextRun = serializers.DateTimeField(source="next_run", allow_null=True)
    enabled = serializers.SerializerMethodField()
    isHitlTimer = serializers.SerializerMethodField()

    @extend_schema_field(
        serializers.ChoiceField(choices=list(TYPE_NAMES.values()))  # older rows may use any django-q2 type
    )
    def get_scheduleType(self, schedule: Schedule) -> str:
        return TYPE_NAMES.get(schedule.schedule_type, schedule.schedule_type)

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_enabled(self, schedule: Schedule) -> bool:
        return schedule.repeats != 0

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_isHitlTimer(self, schedule: Schedule) -> bool:
        return is_hitl_timer(schedule)


def present(schedule: Schedule) -> dict[str, Any]:
    return ScheduleOutputSerializer(schedule).data


class ScheduleInputSerializer(BodySerializer):
    """The body of POST and PUT. On PUT, a field left out keeps its current value."""

    # A GET body's read-only fields may be sent back; metadata is refused below, in its own words.
    ignored_fields = frozenset(READ_ONLY_FIELDS | {"metadata"})
    not_an_object = ("", "not an object")
    unknown_field = "Unknown field."

    name = serializers.CharField(max_length=100, allow_null=True, allow_blank=True, required=False)
    func = serializers.CharField(
        max_length=256,
        required=False,
        help_text="Required on create. Must be on the HITL_SCHEDULABLE_FUNCTIONS allow-list.",
    )
    args = serializers.CharField(allow_null=True, allow_blank=True, required=False, trim_whitespace=False)
    kwargs = serializers.CharField(
        allow_null=True,
        allow_blank=True,
        required=False,
        trim_whitespace=False,
        help_text="May not set django-q2 task options (hook, chain, q_options, …).",
    )
    scheduleType = serializers.ChoiceField(
        choices=list(TYPE_NAMES.values()),
        source="schedule_type",
        required=False,
        help_text=f"{', '.join(CREATABLE_TYPES)} (default ONCE); an update may keep another existing type.",
    )
    minutes = serializers.IntegerField(min_value=1, max_value=32767, allow_null=True, required=False)
    cron = serializers.CharField(max_length=100, allow_null=True, allow_blank=True, required=False)
    nextRun = serializers.DateTimeField(
        source="next_run",
        allow_null=True,
        required=False,
        help_text="First run (default now); computed for CRON.",
    )
    repeats = serializers.IntegerField(min_value=-1, required=False, help_text="Default -1 (forever).")

    def validate_scheduleType(self, name: str) -> str:
        return TYPE_CODES[name]

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        """The model values the create (context ``before`` None) or update leads to, or every problem
        at once: the checks across fields (the type's own fields, schedules.protection's
        ``schedule_problems``, unique names) run beside field errors, on the fields valid alone."""
        try:
            given, errors = super().to_internal_value(data), {}
        except serializers.ValidationError as exc:
            if not isinstance(data, dict):
                raise
            given, errors = self._fields_valid_alone(data), dict(exc.detail)
        values = self._model_values(given)
        for field, message, once in self._checks_across_fields(values):
            if not (once and field in errors):
                errors.setdefault(field, []).append(message)
        if errors:
            raise serializers.ValidationError(errors)
        return values

    def problem_detail(self, errors: list[dict[str, str]]) -> str:
        if not isinstance(self.initial_data, dict):
            return "The body must be a JSON object."
        return "; ".join(f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in errors)

    def _fields_valid_alone(self, data: dict[str, Any]) -> dict[str, Any]:
        valid: dict[str, Any] = {}
        for field in self._writable_fields:
            validate = getattr(self, f"validate_{field.field_name}", None)
            try:
                value = field.run_validation(field.get_value(data))
                valid[field.source] = validate(value) if validate else value
            except (serializers.ValidationError, SkipField):
                continue
        return valid

    def _model_values(self, given: dict[str, Any]) -> dict[str, Any]:
        before: Schedule | None = self.context["before"]
        values = {field: getattr(before, field) for field in NEW_SCHEDULE} if before else dict(NEW_SCHEDULE)
        values.update(given)
        if before is None and values["next_run"] is None and "nextRun" not in self.initial_data:
            values["next_run"] = timezone.now()
        for text_field in ("name", "args", "kwargs", "cron"):
            if values[text_field] is not None and not str(values[text_field]).strip():
                values[text_field] = None
        if values["name"] is not None:
            values["name"] = values["name"].strip()
        if values["schedule_type"] != Schedule.MINUTES:
            values["minutes"] = None
        if values["schedule_type"] != Schedule.CRON:
            values["cron"] = None
        return values

    def _checks_across_fields(self, values: dict[str, Any]) -> Iterator[tuple[str, str, bool]]:
        """(field, message, once) in the order checked. ``once``: a field wrong on its own is not reported
        again by this check; every problem schedule_problems finds is reported."""
        user, before = self.context["user"], self.context["before"]
        yield from ((field, message, True) for field, message in self._timing_problems(values))
        claim_view = {
            "metadata": self.initial_data.get("metadata"),
            **{key: values[key] for key in ("name", "func", "args", "kwargs")},
        }
        for field, message in schedule_problems(user=user, before=before, data=claim_view):
            yield field, message, False
        if "metadata" in self.initial_data:
            yield "metadata", "Schedules have no metadata; use kwargs.", True
        if values["name"] and schedule_name_taken(values["name"], other_than=before):
            yield "name", f"A schedule named '{values['name']}' already exists.", True

    def _timing_problems(self, values: dict[str, Any]) -> Iterator[tuple[str, str]]:
        before, kind = self.context["before"], values["schedule_type"]
        if TYPE_NAMES[kind] not in CREATABLE_TYPES and (before is None or kind != before.schedule_type):
            yield "scheduleType", f"scheduleType must be one of {', '.join(CREATABLE_TYPES)}."
        if kind == Schedule.MINUTES and not values["minutes"]:
            yield "minutes", "minutes is required for scheduleType MINUTES."
        if kind == Schedule.CRON and (problem := _cron_problem(values["cron"])):
            yield "cron", problem


def _cron_problem(expression: str | None) -> str | None:
    if not expression:
        return "cron is required for scheduleType CRON."
    if croniter is None:
        return "CRON schedules need the croniter package, which is not installed."
    if not croniter.is_valid(expression):
        return f"'{expression}' is not a valid cron expression."
    return None


REPEATS_COUNT = "must be -1 (forever) or a positive count."
PROBLEM_400 = OpenApiResponse(description="Invalid body; problem details with every error in `errors`.")
PROBLEM_401 = OpenApiResponse(description="Not authenticated.")
PROBLEM_403 = OpenApiResponse(description="Not staff or admin, or a non-admin changing a HITL schedule.")
PROBLEM_404 = OpenApiResponse(description="No such schedule (or, on read, one you may not see).")


# --- operations ------------------------------------------------------------------------------------


def _locked_schedule(user: Any, schedule_id: int) -> Schedule:
    """The schedule under a row lock, after the change check (call inside a transaction)."""
    schedule = schedule_by_id(schedule_id, for_update=True)
    if schedule is None:
        raise NotFound("Schedule not found.")
    require_may_change(user, schedule)
    return schedule


def _apply(schedule: Schedule, values: dict[str, Any]) -> Schedule:
    for field, value in values.items():
        setattr(schedule, field, value)
    if schedule.schedule_type == Schedule.CRON:
        schedule.next_run = schedule.calculate_next_run()
    schedule.save()
    return schedule


def create_schedule(*, user: Any, body: Any) -> Schedule:
    values = validated_body(ScheduleInputSerializer, body, context={"user": user, "before": None})
    with transaction.atomic():
        return _apply(Schedule(hook=None), values)


def update_schedule(*, user: Any, schedule_id: int, body: Any) -> Schedule:
    with transaction.atomic():
        schedule = _locked_schedule(user, schedule_id)
        values = validated_body(ScheduleInputSerializer, body, context={"user": user, "before": schedule})
        return _apply(schedule, values)


def delete_schedule(*, user: Any, schedule_id: int) -> None:
    with transaction.atomic():
        _locked_schedule(user, schedule_id).delete()


def set_schedule_enabled(
    *, user: Any, schedule_id: int, enabled: bool, repeats: int | None = None
) -> Schedule:
    """Disabled is ``repeats = 0``, which django-q2's scheduler skips; the row and its settings stay.

    Enabling restores ``repeats`` (given, else 1 for a ONCE schedule — kept after it runs — and -1,
    forever, for a recurring one). A one-shot that already ran also shows repeats 0: enabling it runs
    it again at ``nextRun`` (at once if that has passed).
    """
    with transaction.atomic():
        schedule = _locked_schedule(user, schedule_id)
        if not enabled:
            schedule.repeats = 0
        elif repeats is not None:
            schedule.repeats = repeats
        elif schedule.repeats == 0:
            schedule.repeats = 1 if schedule.schedule_type == Schedule.ONCE else -1
        schedule.save(update_fields=["repeats"])
        return schedule


def fire_schedule(*, user: Any, schedule_id: int) -> str:
    """Run a schedule's function now, once, outside its timing. Never a HITL timer (409 for everyone)."""
    schedule = schedule_by_id(schedule_id)
    if schedule is None:
        raise NotFound("Schedule not found.")
    refuse_manual_fire(schedule)
    require_may_change(user, schedule)
    try:
        args = parse_args(schedule.args)
        kwargs = parse_kwargs(schedule.kwargs)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as exc:
        raise Conflict("The schedule's args or kwargs cannot be read; fix them before firing it.") from exc
    kwargs = {key: value for key, value in kwargs.items() if key not in TASK_OPTION_KEYWORDS}
    group = schedule.name or str(schedule.pk)
    return async_task(schedule.func, *args, q_options={"group": group}, **kwargs)


# --- views -----------------------------------------------------------------------------------------


class ScheduleListView(APIView):
    permission_classes = [ScheduleStoreUsers]

    @extend_schema(
        tags=["schedules"],
        operation_id="schedules_list",
        summary="List schedules",
        description="Every schedule you may see, by next run. HITL schedules are listed to admins only.",
        responses={200: ScheduleOutputSerializer(many=True), 401: PROBLEM_401, 403: PROBLEM_403},
    )
    def get(self, request: Request) -> Response:
        schedules = schedules_by_next_run(user=request.user)
        return Response(ScheduleOutputSerializer(schedules, many=True).data)

    @extend_schema(
        tags=["schedules"],
        operation_id="schedules_create",
        summary="Create a schedule",
        description=(
            "Staff and admins. `func` must be on the allow-list; a body that claims HITL (a `hitl-` name, "
            "an approvals.* function, `hitlType`/`hitl_timeout` in kwargs or metadata) is refused for "
            "everyone."
        ),
        request=ScheduleInputSerializer,
        responses={201: ScheduleOutputSerializer, 400: PROBLEM_400, 401: PROBLEM_401, 403: PROBLEM_403},
    )
    def post(self, request: Request) -> Response:
        schedule = create_schedule(user=request.user, body=request.data)
        return Response(present(schedule), status=201)


class ScheduleDetailView(APIView):
    permission_classes = [ScheduleStoreUsers]

    @extend_schema(
        tags=["schedules"],
        operation_id="schedules_retrieve",
        summary="Read a schedule",
        responses={200: ScheduleOutputSerializer, 401: PROBLEM_401, 403: PROBLEM_403, 404: PROBLEM_404},
    )
    def get(self, request: Request, schedule_id: int) -> Response:
        schedule = visible_schedule(user=request.user, schedule_id=schedule_id)
        if schedule is None:
            raise NotFound("Schedule not found.")
        return Response(present(schedule))

    @extend_schema(
        tags=["schedules"],
        operation_id="schedules_update",
        summary="Change a schedule",
        description=(
            "Fields left out keep their values. HITL schedules: admins only. No update may make a "
            "schedule HITL's."
        ),
        request=ScheduleInputSerializer,
        responses={
            200: ScheduleOutputSerializer,
            400: PROBLEM_400,
            401: PROBLEM_401,
            403: PROBLEM_403,
            404: PROBLEM_404,
        },
    )
    def put(self, request: Request, schedule_id: int) -> Response:
        schedule = update_schedule(user=request.user, schedule_id=schedule_id, body=request.data)
        return Response(present(schedule))

    @extend_schema(
        tags=["schedules"],
        operation_id="schedules_destroy",
        summary="Delete a schedule",
        description="HITL schedules: admins only.",
        responses={204: None, 401: PROBLEM_401, 403: PROBLEM_403, 404: PROBLEM_404},
    )
    def delete(self, request: Request, schedule_id: int) -> Response:
        delete_schedule(user=request.user, schedule_id=schedule_id)
        return Response(status=204)


@extend_schema_field({"type": "integer", "minimum": -1, "not": {"enum": [0]}, "nullable": True})
class RepeatsField(serializers.IntegerField):
    """A count of runs: -1 forever, or n >= 1 (0 would enable a schedule that never runs)."""


class ScheduleEnableView(APIView):
    permission_classes = [ScheduleStoreUsers]

    @extend_schema_serializer(component_name="ScheduleEnableInput")
    class InputSerializer(BodySerializer):
        """An optional count of runs; a body that is not an object sets none, as does one without it. Any
        other field is a 400 naming it."""

        repeats = RepeatsField(
            min_value=-1,
            required=False,
            allow_null=True,
            default=None,
            error_messages={key: REPEATS_COUNT for key in ("invalid", "min_value")},
        )

        def to_internal_value(self, data: Any) -> dict[str, Any]:
            return super().to_internal_value(data if isinstance(data, dict) else {})

        def validate_repeats(self, repeats: int | None) -> int | None:
            # to_internal_value reads any body that is not an object as {}: so does this (a list has no .get)
            raw = self.initial_data.get("repeats") if isinstance(self.initial_data, dict) else None
            if repeats is not None and (not isinstance(raw, int) or isinstance(raw, bool) or repeats == 0):
                raise serializers.ValidationError(REPEATS_COUNT)
            return repeats

    @extend_schema(
        tags=["schedules"],
        operation_id="schedules_enable",
        summary="Enable a schedule",
        description=(
            "Sets `repeats` (given, else 1 for ONCE and -1 for recurring schedules when it was 0). "
            "HITL schedules: admins only."
        ),
        request=InputSerializer,
        responses={
            200: ScheduleOutputSerializer,
            400: PROBLEM_400,
            401: PROBLEM_401,
            403: PROBLEM_403,
            404: PROBLEM_404,
        },
    )
    def post(self, request: Request, schedule_id: int) -> Response:
        repeats = validated_body(self.InputSerializer, request.data)["repeats"]
        schedule = set_schedule_enabled(
            user=request.user, schedule_id=schedule_id, enabled=True, repeats=repeats
        )
        return Response(present(schedule))


class ScheduleDisableView(APIView):
    permission_classes = [ScheduleStoreUsers]

    @extend_schema(
        tags=["schedules"],
        operation_id="schedules_disable",
        summary="Disable a schedule",
        description="Sets `repeats` to 0, which the scheduler skips; the row stays. HITL schedules: admins only.",
        request=None,
        responses={200: ScheduleOutputSerializer, 401: PROBLEM_401, 403: PROBLEM_403, 404: PROBLEM_404},
    )
    def post(self, request: Request, schedule_id: int) -> Response:
        schedule = set_schedule_enabled(user=request.user, schedule_id=schedule_id, enabled=False)
        return Response(present(schedule))


class ScheduleFireView(APIView):
    permission_classes = [ScheduleStoreUsers]

    @extend_schema(
        tags=["schedules"],
        operation_id="schedules_fire",
        summary="Run a schedule now",
        description=(
            "Queues the schedule's function once, now, leaving its timing alone. A HITL timeout timer is "
            "never fired by hand (409 for everyone, admins included): decide the pause with "
            "POST /agents/{conversationId}/resume or /cancel. Other HITL schedules: admins only."
        ),
        request=None,
        responses={
            202: inline_serializer(
                "ScheduleFired", {"scheduleId": serializers.IntegerField(), "taskId": serializers.CharField()}
            ),
            401: PROBLEM_401,
            403: PROBLEM_403,
            404: PROBLEM_404,
            409: OpenApiResponse(description="A HITL timer, or args/kwargs that cannot be read."),
        },
    )
    def post(self, request: Request, schedule_id: int) -> Response:
        task_id = fire_schedule(user=request.user, schedule_id=schedule_id)
        return Response({"scheduleId": schedule_id, "taskId": task_id}, status=202)
