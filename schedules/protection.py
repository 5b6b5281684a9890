"""Which django-q2 schedules belong to HITL, and what people may do with the schedule store.

HITL owns its schedules: a pause's timeout timer (``hitl-timeout-<pause id>`` calling
``approvals.timers.fire_timeout``) and the periodic ``hitl-*`` jobs (timer drainer, recovery,
retention). Those are invisible to everyone but admins, only admins change them, and a timer is never
fired by hand — a pause is decided with resume or cancel, never by pulling its trigger.

Both adapters (REST ``/schedulestore/schedules`` and the Django admin) ask here; the recognition
rule exists once, as Python predicates and as the equivalent database filter (which
schedules.selectors reads through).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db.models import Q
from django_q.models import Schedule

from approvals.access import is_admin, is_staff_member
from approvals.timer_arming import TIMER_FUNC as HITL_TIMER_FUNC
from approvals.timer_arming import TIMER_PREFIX as HITL_TIMER_PREFIX
from common.errors import Forbidden, WrongState

# The core names its timers (approvals.timers); the schedule store asks it, never the other way round.
HITL_NAME_PREFIX = "hitl-"
HITL_FUNC_PREFIX = "approvals."
# The one module under approvals. meant for user schedules; everything else there is HITL machinery.
PUBLIC_TASK_MODULE = "approvals.maintenance_tasks."
HITL_MARKERS = ("hitltype", "hitl_timeout")

DEFAULT_SCHEDULABLE_FUNCTIONS = [
    "approvals.maintenance_tasks.noop",
    "approvals.maintenance_tasks.clear_expired_sessions",
]

# Keywords django-q2's async_task takes as task options, not as the function's arguments. In a
# schedule's kwargs they would smuggle in a hook or a chain — arbitrary functions past the allow-list.
TASK_OPTION_KEYWORDS = frozenset(
    {
        "q_options",
        "task_name",
        "hook",
        "group",
        "save",
        "sync",
        "cached",
        "ack_failure",
        "iter_count",
        "iter_cached",
        "chain",
        "broker",
        "cluster",
        "timeout",
    }
)


# --- recognition -----------------------------------------------------------------------------------


def _lower(value: Any) -> str:
    return "" if value is None else str(value).lower()


def _is_timer(name: Any, func: Any) -> bool:
    return _lower(name).startswith(HITL_TIMER_PREFIX) or _lower(func) == HITL_TIMER_FUNC


def _is_hitl_func(func: Any) -> bool:
    func = _lower(func)
    return func.startswith(HITL_FUNC_PREFIX) and not func.startswith(PUBLIC_TASK_MODULE)


def _mentions_hitl(value: Any) -> bool:
    if value is None:
        return False
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = text.lower()
    return any(marker in text for marker in HITL_MARKERS)


def is_hitl_timer(schedule: Any) -> bool:
    """A pause's timeout timer: named ``hitl-timeout-…`` or calling ``approvals.timers.fire_timeout``."""
    return _is_timer(schedule.name, schedule.func)


def is_hitl_timer_task(task: Any) -> bool:
    """A django-q2 task run from a HITL timer (its group is the schedule's name)."""
    return _is_timer(task.group, task.func)


def is_hitl_schedule(schedule: Any) -> bool:
    """HITL owns a schedule that is a timer, is named ``hitl-…``, calls a function under ``approvals.``
    (other than ``approvals.maintenance_tasks``) or carries the ``hitlType``/``hitl_timeout`` marker.

    Case-insensitive, and it fails closed: anything that looks like HITL's is treated as HITL's.
    """
    return (
        is_hitl_timer(schedule)
        or _lower(schedule.name).startswith(HITL_NAME_PREFIX)
        or _is_hitl_func(schedule.func)
        or _mentions_hitl(schedule.kwargs)
    )


def hitl_schedules_filter() -> Q:
    """``is_hitl_schedule`` as a database filter."""
    owned_func = Q(func__istartswith=HITL_FUNC_PREFIX) & ~Q(func__istartswith=PUBLIC_TASK_MODULE)
    marked = Q()
    for marker in HITL_MARKERS:
        marked |= Q(kwargs__icontains=marker)
    return (
        Q(name__istartswith=HITL_TIMER_PREFIX)
        | Q(func__iexact=HITL_TIMER_FUNC)
        | Q(name__istartswith=HITL_NAME_PREFIX)
        | owned_func
        | marked
    )


def claims_hitl(data: Mapping[str, Any]) -> bool:
    """An incoming create or update body that would make a schedule HITL's: a ``hitl-`` name, a HITL
    function, or ``kwargs``/``metadata`` mentioning ``hitlType``/``hitl_timeout``. Surrounding blanks do
    not hide a claim."""
    return bool(_claiming_fields(data))


def _claiming_fields(data: Mapping[str, Any]) -> list[str]:
    name = _lower(data.get("name")).strip()
    func = _lower(data.get("func")).strip()
    fields = []
    if name.startswith(HITL_NAME_PREFIX):  # covers hitl-timeout-
        fields.append("name")
    if _is_hitl_func(func):  # covers approvals.timers.fire_timeout
        fields.append("func")
    fields.extend(field for field in ("kwargs", "metadata") if _mentions_hitl(data.get(field)))
    return fields


CLAIM_MESSAGES = {
    "name": "Names starting with 'hitl-' are reserved for the HITL service's own schedules.",
    "func": "Functions of the HITL service (approvals.*, other than approvals.maintenance_tasks) "
    "are scheduled only by the HITL service itself.",
    "kwargs": "kwargs may not carry the HITL markers hitlType/hitl_timeout.",
    "metadata": "A schedule may not claim to be a HITL timer (hitlType/hitl_timeout).",
}


# --- policy ----------------------------------------------------------------------------------------


def may_use_schedule_store(user: Any) -> bool:
    """Staff and admins use the schedule store; everyone else is refused."""
    if not user or not user.is_authenticated or not user.is_active:
        return False
    return is_staff_member(user) or is_admin(user)


def may_change(user: Any, schedule: Schedule) -> bool:
    if is_hitl_schedule(schedule):
        return is_admin(user)
    return may_use_schedule_store(user)


def require_may_change(user: Any, schedule: Schedule) -> None:
    """Only admins change (update, delete, enable, disable) a HITL schedule; staff and admins any other."""
    if may_change(user, schedule):
        return
    if is_hitl_schedule(schedule):
        raise Forbidden("Access denied: only admins may change HITL schedules")
    raise Forbidden("Access denied: only staff and admins may change schedules")


def refuse_manual_fire(schedule: Schedule) -> None:
    """A HITL timer is never fired by hand, not even by an admin: the pause is decided instead."""
    if is_hitl_timer(schedule):
        raise WrongState(
            "A HITL timeout timer is never fired by hand. Decide the pause instead: "
            "POST /agents/{conversationId}/resume with a verdict, or POST /agents/{conversationId}/cancel.",
            None,
        )


# --- what may be scheduled -------------------------------------------------------------------------


def schedulable_functions() -> list[str]:
    return list(getattr(settings, "HITL_SCHEDULABLE_FUNCTIONS", DEFAULT_SCHEDULABLE_FUNCTIONS))


def parse_args(text: str | None) -> tuple[Any, ...]:
    """Positional arguments as django-q2's scheduler reads them (a Python literal; one value = 1-tuple)."""
    if not text:
        return ()
    value = ast.literal_eval(text)
    return value if isinstance(value, tuple) else (value,)


def parse_kwargs(text: str | None) -> dict[str, Any]:
    """Keyword arguments as django-q2's scheduler reads them: a dict literal or ``x=1, y='a'``."""
    if not text:
        return {}
    try:
        value = ast.literal_eval(text)
    except (SyntaxError, ValueError):
        call = ast.parse(f"f({text})", mode="eval").body
        if not isinstance(call, ast.Call) or call.args or any(k.arg is None for k in call.keywords):
            raise ValueError("not keyword arguments") from None
        return {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords}
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise ValueError("not a dict with string keys")
    return value


def schedule_problems(
    *, user: Any, before: Schedule | None, data: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """What a create (``before`` None) or update may not do, as (field, message) pairs.

    - No body may make a schedule HITL's (for admins too); an admin may keep an existing HITL schedule HITL.
    - ``func`` must be on the ``HITL_SCHEDULABLE_FUNCTIONS`` allow-list — a free dotted path would let
      anyone who may schedule run any code. Only an admin may keep an existing off-list ``func``.
    - ``args``/``kwargs`` must be literals django-q2 can read, and ``kwargs`` may not carry task
      options (``hook``, ``chain``, ``q_options``, …), which would run functions past the allow-list.
    """
    problems: list[tuple[str, str]] = []
    if before is None or not is_hitl_schedule(before):
        for field in _claiming_fields(data):
            problems.append((field, CLAIM_MESSAGES[field]))
    func = str(data.get("func") or "").strip()
    if not func:
        problems.append(("func", "func is required."))
    elif func not in schedulable_functions():
        kept = before is not None and func == before.func and is_admin(user)
        if not kept:
            problems.append(
                (
                    "func",
                    f"'{func}' may not be scheduled; allowed: {', '.join(schedulable_functions()) or 'none'} "
                    "(setting HITL_SCHEDULABLE_FUNCTIONS).",
                )
            )
    try:
        parse_args(data.get("args"))
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        problems.append(("args", "args must be a Python literal, e.g. 1, 'two'."))
    try:
        kwargs = parse_kwargs(data.get("kwargs"))
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        problems.append(
            ("kwargs", "kwargs must be keyword arguments, e.g. days=30, name='x', or a dict literal.")
        )
    else:
        options = sorted(TASK_OPTION_KEYWORDS.intersection(kwargs))
        if options:
            problems.append(("kwargs", f"kwargs may not set task options: {', '.join(options)}."))
    hook = str(data.get("hook") or "").strip()
    if hook and (before is None or hook != before.hook):
        problems.append(("hook", "A result hook is a function call too; schedules may not set one."))
    if str(data.get("intended_date_kwarg") or "").strip() in TASK_OPTION_KEYWORDS:
        problems.append(("intended_date_kwarg", "This keyword is a django-q2 task option, not an argument."))
    return problems
