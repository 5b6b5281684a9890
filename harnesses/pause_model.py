"""R5's model: what each subject and pause of the pause state machine must be, in plain Python.

The profiles a subject runs on, the fixtures made once per test, and ``Model``, the table
harnesses/pause_state_machine.py compares with PostgreSQL after every step (docs/reliability.md, R5).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from approvals.models import Engine
from common.durations import positive_duration

PENDING, RESOLVING, RESOLVED, CANCELLED = "PENDING", "RESOLVING", "RESOLVED", "CANCELLED"
APPROVED, REJECTED = "APPROVED", "REJECTED"
TIMEOUT = "system:timeout"
AUDITED = ("hitl.pause", "hitl.approval", "hitl.restored", "hitl.continuation.cancelled", "hitl.vote")
PAUSING_INPUT = {"RULE": "please delete my account", "TOOL_CALL": "please transfer 100 to bob"}
MAX_CONVERSATIONS, MAX_DISCUSSIONS = 3, 2
GATES = 2  # the test group's two phases each end at a gate: approving the second completes it


@dataclass(frozen=True)
class Profile:
    """What a subject runs on: the kind of pause it opens, its timeout, whether its continuation is
    quick (all tasks local: a timer or a REST decision continues it in the deciding process), and how
    many people must approve its pauses (``required``: docs/approvals-routing.md)."""

    name: str
    surface: str
    kind: str
    policy: str
    timeout: str
    quick: bool
    required: int = 1


# Hypothesis draws early elements more often (it shrinks towards them): the profiles and ways of deciding
# that reach the rarer states (queued continuations, timers) come first.
CONVERSATION_PROFILES = (
    Profile("rule-slow-approve", Engine.REGULAR, "RULE", "AUTO_APPROVE", "PT5M", False),
    Profile("rule-two-approvals", Engine.REGULAR, "RULE", "AUTO_REJECT", "PT10M", True, required=2),
    Profile("tool-reject", Engine.REGULAR, "TOOL_CALL", "AUTO_REJECT", "PT15M", False),
    Profile("rule-abort", Engine.REGULAR, "RULE", "ABORT", "PT20M", True),
    Profile("rule-approve", Engine.REGULAR, "RULE", "AUTO_APPROVE", "PT15M", True),
    Profile("rule-reject", Engine.REGULAR, "RULE", "AUTO_REJECT", "PT10M", True),
    Profile("rule-wait", Engine.REGULAR, "RULE", "WAIT_INDEFINITELY", "", True),
)
GROUP_PROFILES = (
    Profile("group-approve", Engine.GROUP, "PHASE", "AUTO_APPROVE", "PT10M", False),
    Profile("group-two-approvals", Engine.GROUP, "PHASE", "AUTO_APPROVE", "PT10M", False, required=2),
    Profile("group-abort", Engine.GROUP, "PHASE", "ABORT", "PT5M", False),
    Profile("group-reject", Engine.GROUP, "PHASE", "AUTO_REJECT", "PT15M", False),
    Profile("group-wait", Engine.GROUP, "PHASE", "WAIT_INDEFINITELY", "", False),
)
DECIDING = ("queued", "rest", "here")


def finite(profile: Profile) -> bool:
    return profile.policy != "WAIT_INDEFINITELY"


@dataclass
class Fixtures:
    """Made once per test: the owner, the approver, their REST clients, an agent or group per profile."""

    owner: Any
    approver: Any
    owner_client: Any
    approver_client: Any
    second_approver: Any  # the other voter of a pause that needs two approvals
    second_approver_client: Any
    agents: dict[str, str]
    groups: dict[str, str]
    start: datetime


# --- the model ------------------------------------------------------------------------------------


@dataclass
class ModelPause:
    kind: str
    due_at: datetime | None
    gate: int = 0
    status: str = PENDING
    verdict: str = ""
    decided_by: str = ""
    decided_at: datetime | None = None
    lease_until: datetime | None = None  # a worker's (or this process's) claim on the continuation
    cancel_requested: bool = False
    fire_held_until: datetime | None = None  # a restored overdue pause is fired again only after this
    required: int = 1  # approvals it needs
    votes: list[str] = field(default_factory=list)  # who approved it so far (approvals.votes)
    audit: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.audit["hitl.pause"] += 1

    def row(self) -> tuple:
        """As stored: the deadline stays while the pause is open and is cleared when it ends."""
        due = self.due_at if self.status in (PENDING, RESOLVING) else None
        return (self.kind, self.status, self.verdict, self.decided_by, due)


@dataclass
class Subject:
    key: int
    profile: Profile
    db_id: Any
    group_id: Any = None
    state: str = "READY"
    pauses: list[ModelPause] = field(default_factory=list)

    @property
    def group(self) -> bool:
        return self.profile.surface == Engine.GROUP

    @property
    def pending(self) -> ModelPause | None:
        return next((p for p in self.pauses if p.status == PENDING), None)

    @property
    def resolving(self) -> ModelPause | None:
        return next((p for p in self.pauses if p.status == RESOLVING), None)

    @property
    def latest(self) -> ModelPause | None:
        return self.pauses[-1] if self.pauses else None

    def label(self) -> str:
        return f"{self.profile.name}#{self.key}"


TALKABLE = ("READY", "ERROR", "EXECUTION_INTERRUPTED")
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")


class Model:
    """What every subject and pause must be; each method is one service's effect, as the docs state it."""

    def __init__(self) -> None:
        self.subjects: list[Subject] = []
        self.queue: list[tuple[Subject, ModelPause]] = []  # continuations handed to the q-cluster

    def awaiting(self, subject: Subject) -> str:
        return "AWAITING_APPROVAL" if subject.group else "AWAITING_HUMAN"

    def open_pause(self, subject: Subject, now: datetime, gate: int = 0) -> None:
        profile = subject.profile
        due = now + positive_duration(profile.timeout) if finite(profile) else None
        subject.pauses.append(ModelPause(kind=profile.kind, due_at=due, gate=gate, required=profile.required))
        subject.state = self.awaiting(subject)

    def vote(self, subject: Subject, by: str) -> bool:
        """One person's approval of a pause that needs several, audited on its own: True when it completes
        the quorum (the caller then decides it), False when the pause still waits."""
        pause = subject.pending
        pause.votes.append(by)
        pause.audit["hitl.vote"] += 1
        return len(pause.votes) >= pause.required

    def decide(self, subject: Subject, verdict: str, by: str, now: datetime, *, here: bool) -> None:
        """PENDING -> RESOLVING, the subject running; continued here, or queued for the q-cluster."""
        pause = subject.pending
        pause.status, pause.verdict, pause.decided_by, pause.decided_at = RESOLVING, verdict, by, now
        pause.lease_until = None
        pause.audit[f"hitl.approval:{verdict}"] += 1
        subject.state = "IN_PROGRESS"
        if here:
            self.continue_(subject, pause, now)
        else:
            self.queue.append((subject, pause))

    def continue_(self, subject: Subject, pause: ModelPause, now: datetime) -> None:
        """The continuation runs to its end: a conversation is READY (approved or rejected, either
        kind); a discussion cancelled before its continuation started ends CANCELLED, else it fails on a
        rejection, or runs to its next gate (a new pause) or completes."""
        pause.status = RESOLVED
        if not subject.group:
            subject.state = "READY"
        elif pause.cancel_requested:
            pause.audit["hitl.continuation.cancelled"] += 1
            subject.state = "CANCELLED"
        elif pause.verdict == REJECTED:
            subject.state = "FAILED"
        elif pause.gate + 1 < GATES:
            self.open_pause(subject, now, gate=pause.gate + 1)
        else:
            subject.state = "COMPLETED"

    def cancel(self, subject: Subject, by: str) -> str:
        """Cancel: a pending pause is CANCELLED at once; a queued continuation nobody started is
        cancelled before it starts (1:1) or told to stop (group); anything else is refused."""
        pending = subject.pending
        if pending is not None:
            pending.status, pending.verdict, pending.decided_by = CANCELLED, CANCELLED, by
            pending.audit["hitl.approval:CANCELLED"] += 1
            subject.state = "CANCELLED" if subject.group else "EXECUTION_INTERRUPTED"
            return "pending"
        resolving = subject.resolving
        if subject.group and subject.state not in TERMINAL:
            if resolving is not None:
                resolving.cancel_requested = True
            return "requested"
        if not subject.group and resolving is not None and resolving.lease_until is None:
            resolving.status = RESOLVED
            resolving.audit["hitl.continuation.cancelled"] += 1
            subject.state = "EXECUTION_INTERRUPTED"
            return "unstarted"
        return "refused"

    def fire(self, subject: Subject, pause: ModelPause, now: datetime) -> None:
        """A timer's decision by the pause's policy; a quick continuation runs with it, any other is queued."""
        policy = subject.profile.policy
        if policy == "ABORT":
            self.cancel(subject, TIMEOUT)
            return
        verdict = APPROVED if policy == "AUTO_APPROVE" else REJECTED
        self.decide(subject, verdict, TIMEOUT, now, here=subject.profile.quick)

    def due(self, now: datetime) -> list[tuple[Subject, ModelPause]]:
        """What the drainer claims at ``now``: pending, overdue, not held back after a restore."""
        return [
            (s, p)
            for s in self.subjects
            for p in s.pauses
            if p.status == PENDING
            and p.due_at is not None
            and p.due_at <= now
            and (p.fire_held_until is None or p.fire_held_until < now)
        ]

    def restore(self, subject: Subject, pause: ModelPause, now: datetime) -> None:
        """Recovery: a decided pause whose continuation died or never started is PENDING again with its
        deadline (an overdue one held back for a retry interval); one whose cancel was requested ends."""
        if pause.cancel_requested:
            pause.status = RESOLVED
            pause.audit["hitl.continuation.cancelled"] += 1
            if subject.state not in TERMINAL:
                subject.state = "CANCELLED"
            return
        pause.status, pause.verdict, pause.decided_by, pause.decided_at = PENDING, "", "", None
        pause.lease_until = None
        pause.votes = []  # its quorum is gathered again
        retry = timedelta(seconds=30)  # approvals.timer_arming.FAILED_FIRE_RETRY
        pause.fire_held_until = now + retry if pause.due_at is not None and pause.due_at <= now else None
        pause.audit["hitl.restored"] += 1
        subject.state = self.awaiting(subject)

    def recover(self, now: datetime) -> int:
        never_started = now - timedelta(seconds=settings.HITL_CONTINUATION_START_TIMEOUT_SECONDS)
        restored = 0
        for subject in self.subjects:
            for pause in subject.pauses:
                if pause.status != RESOLVING:
                    continue
                if (pause.lease_until is not None and pause.lease_until < now) or (
                    pause.lease_until is None and pause.decided_at < never_started
                ):
                    restored += not pause.cancel_requested
                    self.restore(subject, pause, now)
        return restored

    def run_worker(self, now: datetime) -> None:
        """The q-cluster runs every queued continuation in order: one still RESOLVING and unclaimed
        continues, one whose claim expired is restored, anything else is skipped."""
        queued, self.queue = self.queue, []
        for subject, pause in queued:
            if pause.status != RESOLVING:
                continue
            if pause.lease_until is None:
                self.continue_(subject, pause, now)
            elif pause.lease_until < now:
                self.restore(subject, pause, now)
            else:
                raise AssertionError("a live claim between steps")
