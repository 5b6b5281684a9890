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
from approvals.models import AuditEntry, Engine, Pause, SubjectType, Vote
from approvals.recovery import recover_expired_leases
from approvals.timers import fire_due_batch, fire_timeout
from common.errors import Conflict, WrongState
from conversations import turns
from conversations.agents import OnVersion
from conversations.models import Conversation
from conversations.selectors import talk_on_version
from groups.discussion_decisions import approve_discussion, cancel_discussion
from groups.discussions import start_discussion
from groups.models import GroupConversation
from harnesses.pause_model import (
    APPROVED,
    AUDITED,
    CANCELLED,
    CONVERSATION_PROFILES,
    DECIDING,
    GROUP_PROFILES,
    MAX_CONVERSATIONS,
    MAX_DISCUSSIONS,
    PAUSING_INPUT,
    PENDING,
    REJECTED,
    TALKABLE,
    Fixtures,
    Model,
    ModelPause,
    Profile,
    Subject,
    finite,
)
from harnesses.queue_drain import run_queued_tasks

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

    def decision(self, subject: Subject, verdict: str, how: str, *, second: bool = False) -> None:
        """Decide the subject's pending pause as the approver (``second``: the other approver, a second
        vote): ``here`` (the deciding process continues it), ``queued`` (handed to the q-cluster) or
        ``rest`` (POST …/resume or …/approve; 202 for a vote that does not decide)."""
        fixtures = self.fixtures
        approver = fixtures.second_approver if second else fixtures.approver
        if how == "rest":
            client = fixtures.second_approver_client if second else fixtures.approver_client
            if subject.group:
                response = client.post(
                    f"/groups/{subject.group_id}/conversations/{subject.db_id}/approve?wait=60",
                    {"decision": {"verdict": verdict}},
                    format="json",
                )
            else:
                response = client.post(f"/agents/{subject.db_id}/resume", {"verdict": verdict}, format="json")
            if response.status_code == 409:
                raise WrongState(response.content.decode(), current_state=None)
            assert response.status_code in (200, 202), response.content
            return
        if subject.group:
            approve_discussion(
                user=approver,
                group_id=subject.group_id,
                discussion_id=subject.db_id,
                body={"decision": {"verdict": verdict}},
                continue_here=how == "here",
            )
            return
        decide = decide_and_continue if how == "here" else decide_pause
        decide(
            surface=Engine.REGULAR,
            subject_type=SubjectType.CONVERSATION,
            subject_id=subject.db_id,
            decision=DecisionInput(verdict=verdict),
            actor=actor_for_user(approver),
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
        pause = subject.pending
        voting = verdict == APPROVED and pause.required > 1
        second = voting and self.fixtures.approver.username in pause.votes
        where = "group" if subject.group else subject.profile.kind
        self.tick(verdict.lower(), f"{where}:{how}" + (f":vote {len(pause.votes) + 1}" if voting else ""))
        self.decision(subject, verdict, how, second=second)
        by = (self.fixtures.second_approver if second else self.fixtures.approver).username
        if voting and not self.model.vote(subject, by):
            return  # one approval of two: the pause still waits
        self.model.decide(subject, verdict, by, self.now, here=self.continues_here(subject, how))

    @precondition(lambda self: self._pending())
    @rule(data=st.data(), how=st.sampled_from(DECIDING))
    def approve(self, data: Any, how: str) -> None:
        self._decide(data, APPROVED, how)

    @precondition(lambda self: self._pending())
    @rule(data=st.data(), how=st.sampled_from(DECIDING))
    def reject(self, data: Any, how: str) -> None:
        self._decide(data, REJECTED, how)

    def _voted(self) -> list[Subject]:
        return [s for s in self.model.subjects if s.pending is not None and s.pending.votes]

    @precondition(lambda self: self._voted())
    @rule(data=st.data(), how=st.sampled_from(("here", "rest")))
    def vote_twice_is_refused(self, data: Any, how: str) -> None:
        """The person who approved a pause that needs two approvals approves it again: refused (409),
        nothing recorded, the pause still waits for someone else."""
        subject = self.of(data, self._voted())
        self.tick("vote_twice", how)
        second = subject.pending.votes[0] == self.fixtures.second_approver.username
        try:
            self.decision(subject, APPROVED, how, second=second)
        except (Conflict, WrongState):
            return
        raise AssertionError(f"a second vote of one person on {subject.label()} was taken")

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
            for (
                subject_id,
                pause_id,
                kind,
                status,
                verdict,
                decided_by,
                due_at,
                audit,
                votes,
            ) in cursor.fetchall():
                pauses.setdefault(subject_id, []).append(
                    (pause_id, (kind, status, verdict, decided_by, due_at), audit, votes)
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
            for index, ((_, row, audit, votes), modelled) in enumerate(
                zip(stored, subject.pauses, strict=True)
            ):
                if votes != len(modelled.votes):
                    problems.append(f"{subject.label()} pause {index}: {votes} votes, model {modelled.votes}")
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
        vote=Vote._meta.db_table,
    )


PAUSES_SQL = _sql(
    """
    SELECT p.subject_id, p.id, p.kind, p.status, p.verdict, p.decided_by, p.due_at,
           COALESCE((SELECT json_object_agg(c.k, c.n) FROM (
               SELECT CASE WHEN a.verb = 'hitl.approval' THEN a.verb || ':' || a.verdict ELSE a.verb END AS k,
                      count(*) AS n
               FROM {audit} a WHERE a.pause_id = p.id AND a.verb = ANY(%s) GROUP BY 1) c), '{{}}'),
           (SELECT count(*) FROM {vote} v WHERE v.pause_id = p.id)
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
    from harnesses.agents import payments_agent
    from harnesses.factories import account_bot, deployed_agent, slow_account_bot
    from harnesses.users import client_for, make_user

    owner, approver = make_user("sm-owner"), make_user("sm-approver", "approver")
    second_approver = make_user("sm-approver-2", "approver")
    agents = {}
    for profile in CONVERSATION_PROFILES:
        hitl = _hitl(profile)
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
        hitl = _hitl(profile)
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
        second_approver=second_approver,
        second_approver_client=client_for(second_approver),
        agents=agents,
        groups=groups,
        start=timezone.now().replace(microsecond=0),
    )


def _hitl(profile: Profile) -> dict[str, Any]:
    """A profile's hitlConfig: its timeout, and how many approvals it needs when more than one."""
    hitl: dict[str, Any] = (
        {"timeoutPolicy": profile.policy, "approvalTimeout": profile.timeout} if finite(profile) else {}
    )
    if profile.required > 1:
        hitl["requiredApprovals"] = profile.required
    return hitl


def hits_report() -> str:
    return ", ".join(f"{name}={count}" for name, count in sorted(HITS.items()))
