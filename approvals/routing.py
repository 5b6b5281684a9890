"""Who approves what: the approvers a pause is routed to, how many must approve, and escalation.

``hitlConfig`` (of an agent, a tool rule, a group, an approval request) may say:

- ``approvers``: ``{"groups": [Django group names], "users": [usernames]}``: who may decide. Routing
  narrows, it never grants: a routed pause is decided by admins and by those holding the approver role
  who match a name. Unset: any approver, as before.
- ``requiredApprovals``: how many distinct people must approve (default 1). Any one rejection rejects.
  The requester and the user who raised the pause never count (approvals.votes).
- ``escalation``: ordered steps ``{"after": "PT15M", "approvers": {...}, "notify": true}``: once a step's
  time has passed with no decision, its approvers may decide too (and are told, when ``notify``). The
  timeout policy still applies at the deadline.
- ``remindBefore``: tell the current approvers this long before the deadline.
- ``notifyApprovers``: email the approvers when the pause opens (default: when it is routed; an
  unrouted pause's inbox is every approver's). ``notifyRequester``: email the requester its decision.
  Sent by approvals.notices.

Several levels may speak (an agent and the tool rules its calls matched): the strictest wins. The most
approvals any level asks for, the earliest reminder; the approvers and escalation of the most specific
level that names them (a tool rule over its agent). Matched tool rules that name different approvers
leave the pause to admins alone: no guess about whom the rules meant.

Everything is frozen on the pause when it opens (``Pause.routing``, and one ``PauseRoute`` row per name
with the time it opens), so a later version of the agent never changes who may decide a pending pause.
Who may decide now is part of the inbox's SQL (``routed_scope``), and the decision service asks
``refuse_unrouted`` before any write.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone
from django.utils.dateformat import format as date_format

from approvals.access import group_names, is_admin, is_approver
from approvals.actors import Actor
from approvals.models import Pause, PauseRoute
from common.durations import InvalidDuration, NonPositiveDuration, positive_duration
from common.errors import Forbidden
from common.field_errors import FieldError

ROUTING_KEYS = (
    "approvers",
    "requiredApprovals",
    "escalation",
    "remindBefore",
    "notifyApprovers",
    "notifyRequester",
)
APPROVER_KEYS = ("groups", "users")
STEP_KEYS = ("after", "approvers", "notify")
NAME_MAX = 150
NAMES_MAX = 50
STEPS_MAX = 10
REQUIRED_MAX = 20


# --- configuration -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Approvers:
    groups: tuple[str, ...] = ()
    users: tuple[str, ...] = ()

    def as_json(self) -> dict[str, list[str]]:
        return {"groups": list(self.groups), "users": list(self.users)}

    def __bool__(self) -> bool:
        return bool(self.groups or self.users)


@dataclass(frozen=True)
class Step:
    after: str
    approvers: Approvers
    notify: bool = True


@dataclass(frozen=True)
class Routing:
    """The effective routing of one pause (``effective_routing``). ``routed``: approvers were named, or
    conflicting rules left the pause to admins (``admins_only``)."""

    approvers: Approvers = field(default_factory=Approvers)
    required: int = 1
    escalation: tuple[Step, ...] = ()
    remind_before: str = ""
    admins_only: bool = False
    notify_approvers: bool | None = None  # None: when routed
    notify_requester: bool = False

    @property
    def routed(self) -> bool:
        return bool(self.approvers) or self.admins_only

    def frozen(self, paused_at: datetime) -> dict[str, Any]:
        """``Pause.routing``: the configuration as it applies to this pause, each step with its time."""
        if not (
            self.routed
            or self.escalation
            or self.remind_before
            or self.required > 1
            or self.notify_approvers
            or self.notify_requester
        ):
            return {}
        return {
            "approvers": self.approvers.as_json(),
            "adminsOnly": self.admins_only,
            "requiredApprovals": self.required,
            "escalation": [
                {
                    "after": step.after,
                    "opensAt": (paused_at + positive_duration(step.after)).isoformat(),
                    "approvers": step.approvers.as_json(),
                    "notify": step.notify,
                }
                for step in self.escalation
            ],
            "remindBefore": self.remind_before or None,
            "notifyApprovers": self.notifies_approvers,
            "notifyRequester": self.notify_requester,
        }

    @property
    def notifies_approvers(self) -> bool:
        return self.routed if self.notify_approvers is None else self.notify_approvers

    def remind_at(self, due_at: datetime | None, paused_at: datetime) -> datetime | None:
        """When the approvers are reminded: ``remindBefore`` ahead of the deadline, if that is still ahead."""
        if not self.remind_before or due_at is None:
            return None
        at = due_at - positive_duration(self.remind_before)
        return at if at > paused_at else None


def routing_errors(config: dict[str, Any], field_path: str) -> list[FieldError]:
    """Every problem of the routing keys of one hitlConfig block (or tool rule), under ``field_path``."""
    errors = _approvers_errors(config.get("approvers"), f"{field_path}.approvers")
    required = config.get("requiredApprovals")
    if required is not None and (
        isinstance(required, bool) or not isinstance(required, int) or not 1 <= required <= REQUIRED_MAX
    ):
        errors.append(
            FieldError(
                f"{field_path}.requiredApprovals",
                f"{field_path}.requiredApprovals must be a whole number from 1 to {REQUIRED_MAX}, "
                f"got {json.dumps(required)}",
            )
        )
    errors += _escalation_errors(config.get("escalation"), f"{field_path}.escalation")
    errors += _duration_errors(config.get("remindBefore"), f"{field_path}.remindBefore")
    for flag in ("notifyApprovers", "notifyRequester"):
        if config.get(flag) is not None and not isinstance(config[flag], bool):
            errors.append(FieldError(f"{field_path}.{flag}", f"{field_path}.{flag} must be true or false"))
    if not errors and isinstance(required, int) and required > 1:
        errors += _quorum_errors(config, required, field_path)
    return errors


def _approvers_errors(value: object, path: str) -> list[FieldError]:
    if value is None:
        return []
    if not isinstance(value, dict):
        return [FieldError(path, f'{path} must be an object: {{"groups": [...], "users": [...]}}')]
    errors = [
        FieldError(f"{path}.{key}", f"{path}.{key} is not an approvers field (allowed: groups, users)")
        for key in value
        if key not in APPROVER_KEYS
    ]
    for key in APPROVER_KEYS:
        names = value.get(key)
        if names is None:
            continue
        if not isinstance(names, list) or len(names) > NAMES_MAX:
            errors.append(
                FieldError(f"{path}.{key}", f"{path}.{key} must be a list of at most {NAMES_MAX} names")
            )
            continue
        for index, name in enumerate(names):
            if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX:
                errors.append(
                    FieldError(
                        f"{path}.{key}[{index}]",
                        f"{path}.{key}[{index}] must be a name of 1 to {NAME_MAX} characters",
                    )
                )
    if not errors and not any(value.get(key) for key in APPROVER_KEYS):
        errors.append(FieldError(path, f"{path} names nobody: give groups, users or both"))
    return errors


def _escalation_errors(value: object, path: str) -> list[FieldError]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > STEPS_MAX:
        return [FieldError(path, f"{path} must be a list of at most {STEPS_MAX} steps")]
    errors: list[FieldError] = []
    for index, step in enumerate(value):
        step_path = f"{path}[{index}]"
        if not isinstance(step, dict):
            errors.append(
                FieldError(step_path, f'{step_path} must be an object: {{"after", "approvers", "notify"}}')
            )
            continue
        errors += [
            FieldError(
                f"{step_path}.{key}",
                f"{step_path}.{key} is not an escalation step field (allowed: {', '.join(STEP_KEYS)})",
            )
            for key in step
            if key not in STEP_KEYS
        ]
        if step.get("after") is None:
            errors.append(FieldError(f"{step_path}.after", f'{step_path}.after is required (e.g. "PT15M")'))
        errors += _duration_errors(step.get("after"), f"{step_path}.after")
        if step.get("approvers") is None:
            errors.append(FieldError(f"{step_path}.approvers", f"{step_path}.approvers is required"))
        errors += _approvers_errors(step.get("approvers"), f"{step_path}.approvers")
        if "notify" in step and not isinstance(step["notify"], bool):
            errors.append(FieldError(f"{step_path}.notify", f"{step_path}.notify must be true or false"))
    return errors


def _duration_errors(value: object, path: str) -> list[FieldError]:
    if value is None:
        return []
    try:
        positive_duration(value if isinstance(value, str) else "")
    except (InvalidDuration, NonPositiveDuration):
        return [
            FieldError(
                path, f'{path} must be a positive ISO-8601 duration (e.g. "PT15M"), got {json.dumps(value)}'
            )
        ]
    return []


def _named(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every approvers object of a block: its own, then each escalation step's."""
    steps = [step.get("approvers") for step in config.get("escalation") or [] if isinstance(step, dict)]
    return [value for value in [config.get("approvers"), *steps] if isinstance(value, dict)]


def _quorum_errors(config: dict[str, Any], required: int, field_path: str) -> list[FieldError]:
    """N larger than the people who could ever vote: only knowable when no group is named (a group may
    grow); otherwise ``routing_warnings`` says what today's members allow."""
    named = _named(config)
    if not named or any(value.get("groups") for value in named):
        return []
    users = {name for value in named for name in value.get("users") or []}
    if required <= len(users):
        return []
    return [
        FieldError(
            f"{field_path}.requiredApprovals",
            f"{field_path}.requiredApprovals is {required} but only {len(users)} user(s) may ever approve "
            f"({', '.join(sorted(users))}): the pause could never be approved",
        )
    ]


def routing_warnings(config: object, field_path: str) -> list[FieldError]:
    """Names that match no user or group today (legal: a group may be created later), and a quorum larger
    than the people who could vote today."""
    if not isinstance(config, dict) or routing_errors(config, field_path):
        return []
    named = _named(config)
    users = {name for value in named for name in value.get("users") or []}
    groups = {name for value in named for name in value.get("groups") or []}
    known_users = set(get_user_model().objects.filter(username__in=users).values_list("username", flat=True))
    known_groups = set(Group.objects.filter(name__in=groups).values_list("name", flat=True))
    warnings = [
        FieldError(f"{field_path}.approvers", f"{field_path}: no user named {json.dumps(name)} exists (yet)")
        for name in sorted(users - known_users)
    ] + [
        FieldError(f"{field_path}.approvers", f"{field_path}: no group named {json.dumps(name)} exists (yet)")
        for name in sorted(groups - known_groups)
    ]
    required = config.get("requiredApprovals")
    if isinstance(required, int) and required > 1 and groups:
        members = set(
            get_user_model()
            .objects.filter(Q(username__in=users) | Q(groups__name__in=groups), is_active=True)
            .values_list("username", flat=True)
        )
        if len(members) < required:
            warnings.append(
                FieldError(
                    f"{field_path}.requiredApprovals",
                    f"{field_path}.requiredApprovals is {required} but only {len(members)} person(s) may "
                    "approve today",
                )
            )
    return warnings


def _approvers(value: object) -> Approvers:
    if not isinstance(value, dict):
        return Approvers()
    return Approvers(groups=_clean(value.get("groups")), users=_clean(value.get("users")))


def _clean(names: object) -> tuple[str, ...]:
    """The names as given, trimmed, each once, in order; anything that is not a name is dropped."""
    listed = names if isinstance(names, list) else []
    return tuple(dict.fromkeys(name.strip() for name in listed if isinstance(name, str) and name.strip()))


def _steps(value: object) -> tuple[Step, ...]:
    steps = []
    for step in value if isinstance(value, list) else []:
        if not isinstance(step, dict) or not _approvers(step.get("approvers")):
            continue
        try:
            positive_duration(step.get("after") or "")
        except (InvalidDuration, NonPositiveDuration, TypeError):
            continue
        steps.append(Step(str(step["after"]), _approvers(step["approvers"]), step.get("notify") is not False))
    return tuple(steps)


def effective_routing(hitl_config: object, rules: Iterable[object] = ()) -> Routing:
    """The routing of a pause from its agent's (or group's, or request's) ``hitlConfig`` and the tool rules
    its calls matched: the strictest wins (see the module). Documents are validated on save; what is
    unusable here (stored data older than the rules) is ignored, except that it can never widen."""
    levels = [level for level in [hitl_config, *rules] if isinstance(level, dict)]
    required = max(
        [1]
        + [
            level["requiredApprovals"]
            for level in levels
            if isinstance(level.get("requiredApprovals"), int)
            and not isinstance(level["requiredApprovals"], bool)
        ]
    )
    agent_level = levels[0] if isinstance(hitl_config, dict) else {}
    rule_levels = [level for level in levels if level is not agent_level]
    rule_approvers = {
        json.dumps(_approvers(rule.get("approvers")).as_json())
        for rule in rule_levels
        if rule.get("approvers") is not None
    }
    admins_only = len(rule_approvers) > 1
    named_rules = [rule for rule in rule_levels if rule.get("approvers") is not None]
    approvers = (
        Approvers()
        if admins_only
        else _approvers((named_rules[0] if named_rules else agent_level).get("approvers"))
    )
    escalating = [level for level in rule_levels if level.get("escalation") is not None] or [agent_level]
    reminders = [
        level["remindBefore"]
        for level in levels
        if isinstance(level.get("remindBefore"), str) and not _duration_errors(level["remindBefore"], "")
    ]
    remind_text = max(reminders, key=positive_duration, default="")  # the earliest reminder
    stated = [
        level.get("notifyApprovers") for level in levels if isinstance(level.get("notifyApprovers"), bool)
    ]
    return Routing(
        approvers=approvers,
        required=required,
        escalation=() if admins_only else _steps(escalating[0].get("escalation")),
        remind_before=remind_text,
        admins_only=admins_only,
        notify_approvers=any(stated) if stated else None,  # any level asking to be told is heard
        notify_requester=any(level.get("notifyRequester") is True for level in levels),
    )


def route_rows(pause: Pause, routing: Routing) -> list[PauseRoute]:
    """The PauseRoute rows of a pause: a routed one's approvers from when it opens (step 0: a pause is
    routed exactly when it has step-0 rows), and each escalation step's from its time (on an unrouted
    pause every approver may decide anyway: its steps' rows say whom to tell when)."""
    first = [(0, pause.paused_at, routing.approvers)] if routing.routed else []
    steps = first + [
        (index, pause.paused_at + positive_duration(step.after), step.approvers)
        for index, step in enumerate(routing.escalation, start=1)
    ]
    rows = [
        PauseRoute(pause=pause, step=number, opens_at=opens_at, **{column: name})
        for number, opens_at, approvers in steps
        for column, names in (("username", approvers.users), ("group_name", approvers.groups))
        for name in names
    ]
    if routing.admins_only:  # routed to nobody but admins: one step-0 row that names no one
        rows.insert(0, PauseRoute(pause=pause, step=0, opens_at=pause.paused_at))
    return rows


# --- who may decide now ------------------------------------------------------------------------------


def routes_opened_to(user: Any, now: datetime | None = None) -> QuerySet[PauseRoute]:
    """The routes naming ``user`` (or one of their groups) that are open at ``now``."""
    return _matching_routes(user, now or timezone.now())


def _matching_routes(user: Any, now: datetime) -> QuerySet[PauseRoute]:
    return PauseRoute.objects.filter(opens_at__lte=now).filter(
        Q(username=user.get_username()) | Q(group_name__in=sorted(group_names(user)))
    )


def routed_scope(user: Any, pauses: QuerySet[Pause], now: datetime | None = None) -> QuerySet[Pause]:
    """``pauses`` narrowed, in SQL, to those routing lets ``user`` decide at ``now``: any unrouted one, and a
    routed one whose approvers (or an escalation step already open) name the user or one of their groups
    (admins: all; anyone without the approver role: no routed pause)."""
    if is_admin(user):
        return pauses
    if not is_approver(user):
        return pauses.filter(routed=False)
    opened = _matching_routes(user, now or timezone.now()).filter(pause_id=OuterRef("pk"))
    return pauses.filter(Q(routed=False) | Exists(opened))


def routes_user(user: Any, pause: Pause, now: datetime | None = None) -> bool:
    """Routing lets ``user`` decide ``pause`` at ``now`` (``routed_scope`` for one pause)."""
    if not pause.routed or is_admin(user):
        return True
    if not is_approver(user):
        return False
    return _matching_routes(user, now or timezone.now()).filter(pause_id=pause.pk).exists()


def _names(approvers: dict[str, Any]) -> str:
    parts = [f"group {name}" for name in approvers.get("groups") or []]
    parts += [f"user {name}" for name in approvers.get("users") or []]
    return ", ".join(parts) or "admins only"


def routed_to_text(pause: Pause) -> str:
    """Who may decide ``pause``, in a reviewer's words, e.g. "group finance, user rita; from 10:15 UTC
    also group on-call"."""
    routing = pause.routing or {}
    if not pause.routed:
        return "any approver"
    text = (
        "admins only (the matched tool rules name different approvers)"
        if routing.get("adminsOnly")
        else _names(routing.get("approvers") or {})
    )
    for step in routing.get("escalation") or []:
        opens = datetime.fromisoformat(step["opensAt"])
        text += (
            f"; from {date_format(timezone.localtime(opens), 'Y-m-d H:i T')} also {_names(step['approvers'])}"
        )
    return text


def step_text(pause: Pause, step: int) -> str:
    """Who escalation step ``step`` (1, 2, …) of ``pause`` names, e.g. "group on-call"."""
    steps = (pause.routing or {}).get("escalation") or []
    return _names(steps[step - 1]["approvers"]) if 0 < step <= len(steps) else "?"


def why_not_routed(pause: Pause) -> str:
    return f"This pause is routed to {routed_to_text(pause)}: you are not among them (admins always may)."


def refuse_unrouted(*, pause: Pause, actor: Actor) -> None:
    """Refuse (403) a decision by a person routing does not let decide ``pause`` now, saying who may.
    System actors (timers, guards) are never refused: the timeout policy applies at the deadline."""
    if actor.automated or not pause.routed:
        return
    person = actor.user if actor.user is not None else actor.via
    if person is None or not routes_user(person, pause):  # nobody we can check: fail closed
        raise Forbidden(why_not_routed(pause))
