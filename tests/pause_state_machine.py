"""R5: the pause state machine of both surfaces, checked step by step against a small model.

A hypothesis ``RuleBasedStateMachine`` drives 1:1 conversations and group discussions through pause,
decide (approve, reject; continued here, queued for the q-cluster, or through REST), cancel, time out
(time travel, then the drainer's ``fire_due_batch``; and a late backstop fire), restore (a worker that
died holding the continuation, or one never picked up, then the recovery sweep ``recover_expired_leases``),
the q-cluster worker (``run_queued_tasks``), and the refusals: say while paused or running, decide twice,
decide after a cancel, cancel what already ended. The model (``Model``) is a plain table of what each
subject and pause must be; after every step two queries compare it with PostgreSQL: each
subject's state, each pause's status, verdict, decider and deadline, the audit entries of each pause
(``hitl.pause``, ``hitl.approval`` by verdict, ``hitl.restored``, ``hitl.continuation.cancelled``), and the
continuations waiting on the broker.

Time is virtual: every example runs at a fixed instant that only moves forward (one second per step, a
jump to a deadline, past a lease), so deadlines compare exactly. Fixtures (users, tokens, agents, groups)
are made once per test; each example runs inside a savepoint rolled back at its end.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import time_machine
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django_q.models import OrmQ
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from approvals.actors import actor_for_user
from approvals.continuation_runs import claim_continuation, decide_and_continue
from approvals.decision_input import DecisionInput
from approvals.decisions import decide_pause
from approvals.durations import positive_duration
from approvals.errors import WrongState
from approvals.models import AuditEntry, Pause, SubjectType, Surface
from approvals.recovery import recover_expired_leases
from approvals.timers import fire_due_batch, fire_timeout
from conversations import turns
from conversations.agents import OnVersion
from conversations.models import Conversation
from conversations.selectors import talk_on_version
from groups.discussion_decisions import approve_discussion, cancel_discussion
from groups.discussions import start_discussion
from groups.models import GroupConversation
from tests.queue_drain import run_queued_tasks

PENDING, RESOLVING, RESOLVED, CANCELLED = "PENDING", "RESOLVING", "RESOLVED", "CANCELLED"
APPROVED, REJECTED = "APPROVED", "REJECTED"
TIMEOUT = "system:timeout"
AUDITED = ("hitl.pause", "hitl.approval", "hitl.restored", "hitl.continuation.cancelled")
PAUSING_INPUT = {"RULE": "please delete my account", "TOOL_CALL": "please transfer 100 to bob"}
MAX_CONVERSATIONS, MAX_DISCUSSIONS = 3, 2
GATES = 2  # the test group's two phases each end at a gate: approving the second completes it


@dataclass(frozen=True)
class Profile:
    """What a subject runs on: the kind of pause it opens, its timeout, and whether its continuation is
    quick (all tasks local: a timer or a REST decision continues it in the deciding process)."""

    name: str
    surface: str
    kind: str
    policy: str
    timeout: str
    quick: bool


# Hypothesis draws early elements more often (it shrinks towards them): the profiles and ways of deciding
# that reach the rarer states (queued continuations, timers) come first.
CONVERSATION_PROFILES = (
    Profile("rule-slow-approve", Surface.REGULAR, "RULE", "AUTO_APPROVE", "PT5M", False),
    Profile("tool-reject", Surface.REGULAR, "TOOL_CALL", "AUTO_REJECT", "PT15M", False),
    Profile("rule-abort", Surface.REGULAR, "RULE", "ABORT", "PT20M", True),
    Profile("rule-approve", Surface.REGULAR, "RULE", "AUTO_APPROVE", "PT15M", True),
    Profile("rule-reject", Surface.REGULAR, "RULE", "AUTO_REJECT", "PT10M", True),
    Profile("rule-wait", Surface.REGULAR, "RULE", "WAIT_INDEFINITELY", "", True),
)
GROUP_PROFILES = (
    Profile("group-approve", Surface.GROUP, "PHASE", "AUTO_APPROVE", "PT10M", False),
    Profile("group-abort", Surface.GROUP, "PHASE", "ABORT", "PT5M", False),
    Profile("group-reject", Surface.GROUP, "PHASE", "AUTO_REJECT", "PT15M", False),
    Profile("group-wait", Surface.GROUP, "PHASE", "WAIT_INDEFINITELY", "", False),
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
        return self.profile.surface == Surface.GROUP

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
        subject.pauses.append(ModelPause(kind=profile.kind, due_at=due, gate=gate))
        subject.state = self.awaiting(subject)

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


# --- the machine ----------------------------------------------------------------------------------

HITS: Counter = Counter()
QUERIES: Counter = Counter()
CURRENT = ["setup"]


def count_queries(execute, sql, params, many, context):
    QUERIES[CURRENT[0]] += 1
    return execute(sql, params, many, context)


class PauseStateMachine(RuleBasedStateMachine):
    """Set ``PauseStateMachine.fixtures`` before running (``run_state_machine_as_test``)."""

    fixtures: Fixtures

    subjects = Bundle("subjects")

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()
        self.restores = 0
        self.now = self.fixtures.start
        self._travel = time_machine.travel(self.now, tick=False)
        self._clock = self._travel.start()
        # inside the test's transaction: everything an example writes is rolled back at its end
        self._savepoint = transaction.savepoint()

    def teardown(self) -> None:
        transaction.savepoint_rollback(self._savepoint)
        self._travel.stop()

    # time ---------------------------------------------------------------------------------------

    def move_to(self, moment: datetime) -> None:
        self.now = moment
        self._clock.move_to(moment)

    def tick(self, name: str, how: str = "") -> None:
        """Every step starts one second later; counts the rule (printed with -s, and a hypothesis event)."""
        self.move_to(self.now + timedelta(seconds=1))
        label = f"{name}:{how}" if how else name
        HITS[label] += 1
        CURRENT[0] = label
        event(label)

    # helpers --------------------------------------------------------------------------------------

    def of(self, data: Any, subjects: list[Subject]) -> Subject:
        return data.draw(st.sampled_from(subjects), label="subject")

    def conversation(self, subject: Subject) -> OnVersion:
        """The conversation with its deployed version, in one query (as the say view reads it)."""
        return talk_on_version(self.fixtures.owner, subject.db_id)

    def decision(self, subject: Subject, verdict: str, how: str) -> None:
        """Decide the subject's pending pause as the approver: ``here`` (the deciding process continues it),
        ``queued`` (handed to the q-cluster) or ``rest`` (POST …/resume or …/approve)."""
        fixtures = self.fixtures
        if how == "rest":
            client = fixtures.approver_client
            if subject.group:
                response = client.post(
                    f"/groups/{subject.group_id}/conversations/{subject.db_id}/approve",
                    {"decision": {"verdict": verdict}},
                    format="json",
                )
            else:
                response = client.post(f"/agents/{subject.db_id}/resume", {"verdict": verdict}, format="json")
            if response.status_code == 409:
                raise WrongState(response.content.decode(), current_state=None)
            assert response.status_code == 200, response.content
            return
        if subject.group:
            approve_discussion(
                user=fixtures.approver,
                group_id=subject.group_id,
                discussion_id=subject.db_id,
                body={"decision": {"verdict": verdict}},
                continue_here=how == "here",
            )
            return
        decide = decide_and_continue if how == "here" else decide_pause
        decide(
            surface=Surface.REGULAR,
            subject_type=SubjectType.CONVERSATION,
            subject_id=subject.db_id,
            decision=DecisionInput(verdict=verdict),
            actor=actor_for_user(fixtures.approver),
        )

    def continues_here(self, subject: Subject, how: str) -> bool:
        if how == "here":
            return True
        if how == "rest":  # a group's approve continues in the request; a 1:1 resume only a quick one
            return subject.group or subject.profile.quick
        return False

    def refused_decision(self, subject: Subject, verdict: str, how: str) -> None:
        try:
            self.decision(subject, verdict, how)
        except WrongState:
            return
        raise AssertionError(f"a decision on {subject.label()} was taken with nothing pending")

    # rules: start -----------------------------------------------------------------------------

    @initialize(target=subjects, profile=st.sampled_from(CONVERSATION_PROFILES))
    def first_conversation(self, profile: Profile) -> Subject:
        return self._start_conversation(profile)

    @initialize(target=subjects, profile=st.sampled_from(GROUP_PROFILES))
    def first_discussion(self, profile: Profile) -> Subject:
        return self._start_discussion(profile)

    @precondition(lambda self: sum(not s.group for s in self.model.subjects) < MAX_CONVERSATIONS)
    @rule(target=subjects, profile=st.sampled_from(CONVERSATION_PROFILES))
    def start_conversation(self, profile: Profile) -> Subject:
        return self._start_conversation(profile)

    @precondition(lambda self: sum(s.group for s in self.model.subjects) < MAX_DISCUSSIONS)
    @rule(target=subjects, profile=st.sampled_from(GROUP_PROFILES))
    def start_discussion(self, profile: Profile) -> Subject:
        return self._start_discussion(profile)

    def _start_conversation(self, profile: Profile) -> Subject:
        self.tick("start_conversation")
        started = turns.start_conversation(
            user=self.fixtures.owner, agent_id=self.fixtures.agents[profile.name], environment="production"
        )
        subject = Subject(len(self.model.subjects), profile, started.conversation.pk)
        self.model.subjects.append(subject)
        return subject

    def _start_discussion(self, profile: Profile) -> Subject:
        """A discussion runs its first phase and pauses at the first gate."""
        self.tick("start_discussion")
        group_id = self.fixtures.groups[profile.name]
        discussion = start_discussion(user=self.fixtures.owner, group_id=group_id, question="Ship on Friday?")
        subject = Subject(len(self.model.subjects), profile, discussion.pk, group_id=group_id)
        self.model.subjects.append(subject)
        self.model.open_pause(subject, self.now)
        return subject

    # rules: say -------------------------------------------------------------------------------

    def _talkable(self) -> list[Subject]:
        return [s for s in self.model.subjects if not s.group and s.state in TALKABLE]

    def _busy(self) -> list[Subject]:
        return [
            s for s in self.model.subjects if not s.group and s.state in ("AWAITING_HUMAN", "IN_PROGRESS")
        ]

    @precondition(lambda self: self._talkable())
    @rule(data=st.data())
    def say_a_pausing_turn(self, data: Any) -> None:
        """A RULE pause (the account bot's deletion) or a TOOL_CALL pause (the gated transfer)."""
        subject = self.of(data, self._talkable())
        self.tick("say_a_pausing_turn", subject.profile.kind)
        said = turns.say(
            conversation=self.conversation(subject),
            user=self.fixtures.owner,
            user_input=PAUSING_INPUT[subject.profile.kind],
            context=None,
        )
        assert said.conversation.state == "AWAITING_HUMAN", said.conversation.state
        self.model.open_pause(subject, self.now)

    @precondition(lambda self: self._busy())
    @rule(data=st.data(), via=st.sampled_from(("service", "rest")))
    def say_while_paused_or_running_is_refused(self, data: Any, via: str) -> None:
        subject = self.of(data, self._busy())
        self.tick("say_while_busy", via)
        if via == "rest":
            response = self.fixtures.owner_client.post(
                f"/agents/{subject.db_id}", {"input": "hello"}, format="json"
            )
            assert response.status_code == 409, response.content
            return
        try:
            turns.say(
                conversation=self.conversation(subject),
                user=self.fixtures.owner,
                user_input="hello",
                context=None,
            )
        except WrongState:
            return
        raise AssertionError(f"{subject.label()} took input while {subject.state}")

    # rules: decide ----------------------------------------------------------------------------

    def _pending(self) -> list[Subject]:
        return [s for s in self.model.subjects if s.pending is not None]

    def _decide(self, data: Any, verdict: str, how: str) -> None:
        subject = self.of(data, self._pending())
        self.tick(verdict.lower(), f"{'group' if subject.group else subject.profile.kind}:{how}")
        self.decision(subject, verdict, how)
        self.model.decide(
            subject,
            verdict,
            self.fixtures.approver.username,
            self.now,
            here=self.continues_here(subject, how),
        )

    @precondition(lambda self: self._pending())
    @rule(data=st.data(), how=st.sampled_from(DECIDING))
    def approve(self, data: Any, how: str) -> None:
        self._decide(data, APPROVED, how)

    @precondition(lambda self: self._pending())
    @rule(data=st.data(), how=st.sampled_from(DECIDING))
    def reject(self, data: Any, how: str) -> None:
        self._decide(data, REJECTED, how)

    def _decided(self) -> list[Subject]:
        return [
            s
            for s in self.model.subjects
            if s.pending is None and s.latest is not None and s.latest.verdict in (APPROVED, REJECTED)
        ]

    def _cancelled(self) -> list[Subject]:
        return [
            s
            for s in self.model.subjects
            if s.pending is None
            and s.latest is not None
            and (s.latest.verdict == CANCELLED or s.latest.audit["hitl.continuation.cancelled"])
        ]

    @precondition(lambda self: self._decided() or self._cancelled())
    @rule(
        data=st.data(), verdict=st.sampled_from((APPROVED, REJECTED)), how=st.sampled_from(("here", "rest"))
    )
    def decide_twice_or_after_cancel_is_refused(self, data: Any, verdict: str, how: str) -> None:
        """A subject with nothing pending whose last pause was decided (decide twice) or cancelled
        (decide after a cancel): refused, nothing changes."""
        cancelled = self._cancelled()
        subject = self.of(data, self._decided() + cancelled)
        self.tick("decide_after_cancel" if subject in cancelled else "decide_twice", how)
        self.refused_decision(subject, verdict, how)

    # rules: cancel ----------------------------------------------------------------------------

    def _cancellable(self) -> list[Subject]:
        return [s for s in self.model.subjects if s.pending is not None or s.resolving is not None]

    @rule(
        subject=subjects,
        data=st.data(),
        via=st.sampled_from(("service", "service", "rest")),
    )
    def cancel(self, subject: Subject, data: Any, via: str) -> None:
        """Cancel one with a pending pause or a queued continuation when there is one, else the bundle's
        subject in whatever state it is: the model says whether it is cancelled, told to stop, or
        refused."""
        open_one = bool(self._cancellable())
        if open_one:
            subject = self.of(data, self._cancellable())
        self._cancel(subject, via, "cancel" if open_one else "cancel_any")

    def _cancel(self, subject: Subject, via: str, name: str) -> None:
        self.tick(name, via)
        expected = self.model.cancel(subject, self.fixtures.owner.username)
        event(f"cancel outcome: {expected}")
        HITS[f"cancel->{expected}"] += 1
        refused = False
        if via == "rest":
            path = (
                f"/groups/{subject.group_id}/conversations/{subject.db_id}/cancel"
                if subject.group
                else f"/agents/{subject.db_id}/cancel"
            )
            response = self.fixtures.owner_client.post(path, format="json")
            refused = response.status_code == 409
            assert response.status_code in (200, 409), response.content
        else:
            try:
                if subject.group:
                    cancel_discussion(
                        user=self.fixtures.owner, group_id=subject.group_id, discussion_id=subject.db_id
                    )
                else:
                    turns.cancel_conversation(
                        conversation=self.conversation(subject).conversation,
                        actor=actor_for_user(self.fixtures.owner),
                    )
            except WrongState:
                refused = True
        assert refused == (expected == "refused"), (subject.label(), expected, refused)

    # rules: time ------------------------------------------------------------------------------

    def _deadlines(self) -> list[datetime]:
        return sorted(
            {p.due_at for s in self.model.subjects for p in s.pauses if p.status == PENDING and p.due_at}
        )

    @precondition(lambda self: self._deadlines() or self._decided_pauses())
    @rule(data=st.data())
    def time_out(self, data: Any) -> None:
        """Travel to one pending deadline (and a second past it) and run the drainer's batch: every pause
        due by then is decided by its policy, exactly once. With no deadline pending: a pause's backstop
        schedule, or a repeated delivery of it, fires after the pause was decided, cancelled or restored,
        which decides nothing."""
        if not self._deadlines():
            return self._late_fire(data)
        self.tick("time_out")
        deadline = data.draw(st.sampled_from(self._deadlines()), label="deadline")
        self.move_to(max(self.now, deadline + timedelta(seconds=1)))
        due = self.model.due(self.now)
        fired = fire_due_batch()
        for subject, pause in sorted(due, key=lambda sp: sp[1].due_at):
            self.model.fire(subject, pause, self.now)
        HITS["time_out->fired"] += len(due)
        assert fired == len(due), (fired, len(due))
        return None

    def _decided_pauses(self) -> list[tuple[Subject, ModelPause]]:
        return [(s, p) for s in self.model.subjects for p in s.pauses if p.status != PENDING and p.due_at]

    def _late_fire(self, data: Any) -> None:
        if not self._decided_pauses():
            return
        subject, pause = data.draw(st.sampled_from(self._decided_pauses()), label="pause")
        self.tick("late_timer_fire")
        self.move_to(max(self.now, pause.due_at + timedelta(seconds=1)))
        pause_id = self.db_pause_ids()[subject.db_id][subject.pauses.index(pause)]
        outcome = fire_timeout(str(pause_id))
        assert outcome == "no-op", outcome

    # rules: restore and the worker ------------------------------------------------------------

    def _unstarted(self) -> list[tuple[Subject, ModelPause]]:
        return [
            (s, p) for s in self.model.subjects if (p := s.resolving) is not None and p.lease_until is None
        ]

    @precondition(lambda self: self._unstarted())
    @rule(data=st.data())
    def restore(self, data: Any) -> None:
        """A queued continuation is claimed by a worker that dies (its lease runs out), or is never
        picked up (the two in turn within an example, so both are met even in short runs); the recovery
        sweep puts the pause back to PENDING (or ends it, if cancelled)."""
        subject, pause = data.draw(st.sampled_from(self._unstarted()), label="pause")
        how = ("worker died", "never started")[self.restores % 2]
        self.restores += 1
        self.tick("restore", how)
        if how == "worker died":
            pause_id = self.db_pause_ids()[subject.db_id][subject.pauses.index(pause)]
            assert claim_continuation(str(pause_id)) is not None
            pause.lease_until = self.now + timedelta(seconds=settings.HITL_CONTINUATION_LEASE_SECONDS)
            self.move_to(pause.lease_until + timedelta(seconds=1))
        else:
            start_timeout = timedelta(seconds=settings.HITL_CONTINUATION_START_TIMEOUT_SECONDS)
            self.move_to(max(self.now, pause.decided_at + start_timeout + timedelta(seconds=1)))
        expected = self.model.recover(self.now)
        report = recover_expired_leases()
        assert report.get("restoredContinuations") == expected, (report, expected)
        assert report.get("interruptedTurns") == 0, report

    @precondition(lambda self: self.model.queue)
    @rule()
    def run_worker(self) -> None:
        """The q-cluster runs what was queued (a restored or finished pause's task finds nothing to do)."""
        self.tick("run_worker")
        expected = len(self.model.queue)
        ran = run_queued_tasks()
        self.model.run_worker(self.now)
        assert ran == expected, (ran, expected)

    # the invariant ----------------------------------------------------------------------------

    def db_pause_ids(self) -> dict[Any, list[Any]]:
        ids: dict[Any, list[Any]] = {}
        for subject_id, pause_id in (
            Pause.objects.filter(subject_id__in=[s.db_id for s in self.model.subjects])
            .order_by("paused_at")
            .values_list("subject_id", "id")
        ):
            ids.setdefault(subject_id, []).append(pause_id)
        return ids

    @invariant()
    def the_database_is_what_the_model_says(self) -> None:
        """Two queries: every pause of the example's subjects with its audit counts; the subjects' states
        with the broker's queue and any audited entry that names no pause."""
        CURRENT[0] = "invariant"
        subjects = self.model.subjects
        ids = [s.db_id for s in subjects]
        with connection.cursor() as cursor:
            cursor.execute(PAUSES_SQL, [list(AUDITED), ids])
            pauses: dict[Any, list[tuple]] = {}
            for subject_id, pause_id, kind, status, verdict, decided_by, due_at, audit in cursor.fetchall():
                pauses.setdefault(subject_id, []).append(
                    (pause_id, (kind, status, verdict, decided_by, due_at), audit)
                )
            cursor.execute(STATES_SQL, [ids, ids, ids, list(AUDITED)])
            states = dict(cursor.fetchall())
        problems = []
        for subject in subjects:
            if states.get(str(subject.db_id)) != subject.state:
                problems.append(
                    f"{subject.label()}: state {states.get(str(subject.db_id))}, model {subject.state}"
                )
            stored = pauses.get(subject.db_id, [])
            if len(stored) != len(subject.pauses):
                problems.append(f"{subject.label()}: {len(stored)} pauses, model {len(subject.pauses)}")
                continue
            for index, ((_, row, audit), modelled) in enumerate(zip(stored, subject.pauses, strict=True)):
                if row != modelled.row():
                    problems.append(f"{subject.label()} pause {index}: {row}, model {modelled.row()}")
                if audit != dict(+modelled.audit):
                    problems.append(
                        f"{subject.label()} pause {index} audit: {audit}, model {dict(+modelled.audit)}"
                    )
        if int(states["queued"]) != len(self.model.queue):
            problems.append(f"queued continuations: {states['queued']}, model {len(self.model.queue)}")
        if int(states["unattributed"]):
            problems.append(f"{states['unattributed']} audited entries name no pause")
        assert not problems, "\n".join(problems)


def _sql(template: str) -> str:
    return template.format(
        pause=Pause._meta.db_table,
        audit=AuditEntry._meta.db_table,
        conversation=Conversation._meta.db_table,
        discussion=GroupConversation._meta.db_table,
        broker=OrmQ._meta.db_table,
    )


PAUSES_SQL = _sql(
    """
    SELECT p.subject_id, p.id, p.kind, p.status, p.verdict, p.decided_by, p.due_at,
           COALESCE((SELECT json_object_agg(c.k, c.n) FROM (
               SELECT CASE WHEN a.verb = 'hitl.approval' THEN a.verb || ':' || a.verdict ELSE a.verb END AS k,
                      count(*) AS n
               FROM {audit} a WHERE a.pause_id = p.id AND a.verb = ANY(%s) GROUP BY 1) c), '{{}}')
    FROM {pause} p WHERE p.subject_id = ANY(%s) ORDER BY p.paused_at
    """
)
STATES_SQL = _sql(
    """
    SELECT id::text, state FROM {conversation} WHERE id = ANY(%s)
    UNION ALL SELECT id::text, state FROM {discussion} WHERE id = ANY(%s)
    UNION ALL SELECT 'queued', count(*)::text FROM {broker}
    UNION ALL SELECT 'unattributed', count(*)::text FROM {audit}
        WHERE subject_id = ANY(%s) AND verb = ANY(%s) AND pause_id IS NULL
    """
)


def make_fixtures(http_url: str) -> Fixtures:
    """Users, tokens, one agent per conversation profile and one group per group profile."""
    from groups.demo_group import demo_member_document
    from groups.store import create_group
    from tests.conftest import client_for, make_user
    from tests.factories import account_bot, deployed_agent, slow_account_bot
    from tests.toolgate.agents import payments_agent

    owner, approver = make_user("sm-owner"), make_user("sm-approver", "approver")
    agents = {}
    for profile in CONVERSATION_PROFILES:
        hitl = (
            {"timeoutPolicy": profile.policy, "approvalTimeout": profile.timeout} if finite(profile) else {}
        )
        if profile.kind == "TOOL_CALL":
            document = payments_agent(http_url, tool_approvals={"requireApproval": ["transfer_*"], **hitl})
        elif profile.quick:
            document = account_bot(hitlConfig=hitl)
        else:
            document = slow_account_bot(hitlConfig=hitl)
        agents[profile.name] = deployed_agent(document)
    member = deployed_agent(demo_member_document("pat", "Ship it."))
    phases = [
        {"name": "Opinions", "type": "OPINION", "requiresApproval": True},
        {"name": "Challenge", "type": "CHALLENGE", "requiresApproval": True},
    ]
    groups = {}
    for profile in GROUP_PROFILES:
        hitl = (
            {"timeoutPolicy": profile.policy, "approvalTimeout": profile.timeout} if finite(profile) else {}
        )
        document = {
            "name": profile.name,
            "members": [{"agentId": member, "role": "Optimist"}],
            "phases": phases,
            "hitlConfig": hitl,
        }
        groups[profile.name] = str(create_group(document=document).group_id)
    return Fixtures(
        owner=owner,
        approver=approver,
        owner_client=client_for(owner),
        approver_client=client_for(approver),
        agents=agents,
        groups=groups,
        start=timezone.now().replace(microsecond=0),
    )


def hits_report() -> str:
    return ", ".join(f"{name}={count}" for name, count in sorted(HITS.items()))
