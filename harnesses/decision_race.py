"""Exactly one decision per pause, on every surface at once (docs/reliability.md, R1): the harness.

Each round opens one pending pause (a RULE pause of a 1:1 conversation, a TOOL_CALL pause of a scripted
model, a group discussion waiting for sign-off, or an approval request a service account filed), then
releases eight racers on it with one ``threading.Barrier``, each on a surface of its own: REST resume
(approve), REST resume (reject), REST cancel, the admin decision page, the timer (``fire_timeout``, as the
q-cluster task calls it), MCP resume and MCP cancel (the tool services run as the MCP server runs them,
``mcp_surface.server._call``) and a Slack button click (signed with slack_sdk's signing, posted to the
interactions endpoint). An approval request's eight (``REQUEST_SURFACES``) are the same surfaces on its
own operations: REST decision (approve, reject), the withdrawal by the service account that filed it over
REST, the admin decision page, the timer, MCP's decision (an approval with an edit of the arguments) and
the withdrawal by the person it was made for over MCP, and a click on its Slack card.
The racers are eight real threads that live for the whole run, each with its own PostgreSQL connection
(closed when the run ends), so a round costs one barrier, not eight connections.

A round is judged twice: from the database (the pause is no longer pending and has exactly one
``hitl.approval`` audit entry, whose actor names the winner) and from the answers (the winner's surface
said it decided; every other racer got a clear lost-race answer: 409, ``WRONG_STATE``/``CONFLICT``, the
timer's ``no-op``, Slack's "already resolved" card; or, for a cancel that came after the decision, the
cancel request it made; never a 500 or an exception). An approval request is also judged by its own
status, which must say what its pause's one decision said: APPROVED, REJECTED or CANCELLED; or CANCELLED
after an approval when a withdrawal came after it (one ``hitl.request.withdrawn`` entry, and that
withdrawal's answer says it came late).
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

from django.db import connections
from django.test import Client
from rest_framework.test import APIClient
from slack_sdk.signature import SignatureVerifier

from approval_requests.filing import file_approval_request
from approval_requests.models import ApprovalRequest, RequestStatus
from approvals.models import AuditEntry, Pause, PauseStatus, Verdict, Vote
from approvals.timers import fire_timeout
from conversations import turns
from conversations.selectors import talk_on_version
from groups.discussions import start_discussion
from harnesses.agents import payments_agent
from harnesses.factories import account_bot, deployed_agent
from harnesses.members import answering, group
from harnesses.queue_drain import run_queued_tasks
from harnesses.users import client_for, make_user
from mcp_surface import conversation_tools, group_tools, request_tools
from mcp_surface.server import _call
from slack_surface.interactions import ANSWER_TASK
from slack_surface.messages import ALREADY_RESOLVED

TIMEOUT = {"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT5M"}
SIGNING_SECRET = "slack-signing-secret-for-the-races"
INBOX = "/admin/approvals/pendingapproval/"
RACERS = 8
HEAD_START = 0.12  # seconds: in odd rounds, how much later than the round's favourite the others may start
# the round's kind, by round number: of every six, two RULE pauses, a tool call, a group discussion, an
# approval request, and a RULE pause that needs two approvals (QUORUM: docs/approvals-routing.md)
KINDS = ("RULE", "TOOL_CALL", "RULE", "GROUP", "REQUEST", "QUORUM")
PAUSE_KIND = {"GROUP": "PHASE", "REQUEST": "ACTION", "QUORUM": "RULE"}
QUORUM = {"requiredApprovals": 2}
SERVICE_ACCOUNT = "refund-bot"

# what each racer's answer may be: a decision won or lost; a cancel accepted (200: it ended the pending
# pause, or the decided continuation before it started; the answer does not say which), a cancel request
# (202, or a discussion told to stop: the decision came first), or lost (409)
WON, LOST, CANCELLED, LATE_CANCEL = "won", "lost", "cancelled", "cancel-request"
# of a pause that needs two approvals: an approval recorded as one vote of two, nothing decided (VOTED); an
# approval the admin page accepted (a redirect either way: the database says whether it voted or decided)
VOTED, ACCEPTED = "voted", "accepted"


@dataclass
class World:
    """Everything a round reuses: accounts and their clients, agents, the group, the Slack integration."""

    owner: Any  # also the person every approval request is made for
    users: dict[str, Any]
    rule_agent: str
    tool_agent: str
    quorum_agent: str
    group_id: str
    slack_name: str
    slack: Any  # the fake Slack Web API the card updates go to (tests.slack_surface.conftest.FakeSlack)
    transport: Any = None  # InProcess, or OverHttp (below)

    @classmethod
    def build(cls, *, tool_server_url: str, slack: Any) -> World:
        from slack_surface.integrations import IntegrationInput, create_integration
        from toolgate.outbound.secret_store import set_secret

        owner = make_user("alice")
        users = {name: make_user(name, "approver") for name in ("ann", "ben", "cid", "dee")}
        users["alice"] = owner
        users[SERVICE_ACCOUNT] = make_user(SERVICE_ACCOUNT, "agent")
        slack_admin = make_user("slackbot", "admin")
        rule_document = account_bot()
        rule_document["hitlConfig"].update(TIMEOUT)
        rule_agent = deployed_agent(rule_document)
        quorum_document = account_bot()
        quorum_document["hitlConfig"].update(TIMEOUT | QUORUM)
        quorum_agent = deployed_agent(quorum_document)
        tool_agent = deployed_agent(payments_agent(tool_server_url, hitl_config=TIMEOUT))
        group_id = group(
            [(answering("pat", "Ship it."), "Optimist")],
            [
                {"name": "Opinions", "type": "OPINION", "requiresApproval": True},
                {"name": "Decision", "type": "SYNTHESIS"},
            ],
            hitlConfig=TIMEOUT,
        )
        set_secret(name="races.slack.signing", value=SIGNING_SECRET)
        set_secret(name="races.slack.bot", value="xoxb-races")
        create_integration(
            name="races",
            data=IntegrationInput(
                agent_id=rule_agent,
                environment="production",
                conversation_owner=None,
                signing_secret="${vault:races.slack.signing}",
                bot_token="${vault:races.slack.bot}",
                approval_channel="CRACES",
                approver_user_ids="USLACKER",
            ),
            creator=slack_admin,
        )
        world = cls(owner, users, rule_agent, tool_agent, quorum_agent, group_id, "races", slack)
        world.transport = InProcess(world)
        return world


@dataclass
class Target:
    """The pending pause of a round and how each surface names its subject."""

    kind: str
    pause: Pause
    subject_id: str
    group_id: str | None = None


def open_pause(world: World, kind: str) -> Target:
    """A real pending pause, opened by the owner's turn through the services the REST views call (the
    turn pipeline, the tool gate, the discussion's member turns; an approval request's filing by its
    service account, for the owner), never written by hand."""
    if kind == "REQUEST":
        filed = file_approval_request(user=world.users[SERVICE_ACCOUNT], body=request_filing(world))
        assert filed.created and filed.request.status == RequestStatus.PENDING
        subject_id, group_id = str(filed.request.pk), None
    elif kind == "GROUP":
        discussion = start_discussion(user=world.owner, group_id=world.group_id, question="Ship on Friday?")
        assert discussion.state == "AWAITING_APPROVAL", discussion.state
        subject_id, group_id = str(discussion.pk), world.group_id
    else:
        agent_id = {"RULE": world.rule_agent, "QUORUM": world.quorum_agent}.get(kind, world.tool_agent)
        started = turns.start_conversation(user=world.owner, agent_id=agent_id, environment="production")
        subject_id, group_id = str(started.conversation.pk), None
        said = turns.say(
            conversation=talk_on_version(world.owner, subject_id),
            user=world.owner,
            user_input="please transfer 100 to bob" if kind == "TOOL_CALL" else "please delete my account",
            context={},
        )
        assert said.conversation.state == "AWAITING_HUMAN", said.conversation.state
    pause = Pause.objects.get(subject_id=subject_id, status=PauseStatus.PENDING)
    assert pause.kind == PAUSE_KIND.get(kind, kind) and pause.due_at is not None
    return Target(kind, pause, subject_id, group_id)


def request_filing(world: World) -> dict[str, Any]:
    """A new approval request's body: a refund for the owner, timing out like the other pauses."""
    return {
        "idempotencyKey": f"races/{uuid.uuid4()}",
        "agent": "refund-bot",
        "action": {"name": "refund", "arguments": {"orderId": "A-1", "amount": 250}},
        "reason": "Refund over 100 EUR",
        "onBehalfOf": world.owner.get_username(),
        "hitlConfig": TIMEOUT,
    }


# --- how a racer reaches the server: in this process, or over HTTP --------------------------------------


class InProcess:
    """The Django test clients (DRF's with tokens, the admin's logged in) and the MCP tools run as the MCP
    server runs them (``mcp_surface.server._call``), in this process."""

    head_start = HEAD_START

    def __init__(self, world: World) -> None:
        admin_page = Client()
        admin_page.force_login(world.users["cid"])
        self.clients: dict[str, Any] = {name: client_for(user) for name, user in world.users.items()}
        self.clients |= {"admin page": admin_page, "slack": Client()}
        self.users = world.users

    def post_json(self, who: str, path: str, body: dict[str, Any] | None = None) -> Any:
        client: APIClient = self.clients[who]
        return client.post(path, body, format="json") if body is not None else client.post(path)

    def post_form(self, who: str, path: str, data: Any, headers: dict[str, str] | None = None) -> Any:
        if isinstance(data, str):
            meta = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in (headers or {}).items()}
            return self.clients[who].post(
                path, data=data, content_type="application/x-www-form-urlencoded", **meta
            )
        return self.clients[who].post(path, data)

    def mcp(self, who: str, tool: str, arguments: dict[str, Any]) -> Any:
        service = MCP_SERVICES[tool]
        return _call(service, self.users[who], {_snake(k): v for k, v in arguments.items()})


def _snake(name: str) -> str:
    return {
        "conversationId": "conversation_id",
        "groupId": "group_id",
        "requestId": "request_id",
        "amendedArguments": "amended_arguments",
    }.get(name, name)


MCP_SERVICES = {
    "resume_conversation": conversation_tools.resume_conversation,
    "cancel_conversation": conversation_tools.cancel_conversation,
    "approve_group_phase": group_tools.approve_group_phase,
    "cancel_group_discussion": group_tools.cancel_group_discussion,
    "decide_approval_request": request_tools.decide_approval_request,
    "cancel_approval_request": request_tools.cancel_approval_request,
}


# --- the surfaces: each returns WON, LOST, CANCELLED, LATE_CANCEL or what went wrong -------------------


def _rest(response: Any, *, cancel: bool = False) -> str:
    if response.status_code == 409 and response.json().get("code") == "WRONG_STATE":
        return LOST
    if response.status_code == 202 and response.json().get("status") == "VOTE_RECORDED":
        return VOTED
    if cancel and response.status_code == 202:
        return LATE_CANCEL  # the decision came first: the running continuation was told to stop
    if response.status_code == 200:
        return CANCELLED if cancel else WON
    return f"HTTP {response.status_code}: {response.content[:300]!r}"


def _subject_path(target: Target) -> str:
    if target.kind == "GROUP":
        return f"/groups/{target.group_id}/conversations/{target.subject_id}"
    return f"/agents/{target.subject_id}"


def rest_resume(verdict: str, who: str) -> Callable[[World, Target], str]:
    def decide(world: World, target: Target) -> str:
        if target.kind == "GROUP":
            body: dict[str, Any] = {"decision": {"verdict": verdict}}
            return _rest(world.transport.post_json(who, f"{_subject_path(target)}/approve?wait=60", body))
        return _rest(world.transport.post_json(who, f"{_subject_path(target)}/resume", {"verdict": verdict}))

    return decide


def rest_cancel(world: World, target: Target) -> str:
    response = world.transport.post_json("alice", f"{_subject_path(target)}/cancel")
    if target.kind == "GROUP" and response.status_code == 200:
        body = response.json()
        return CANCELLED if body["state"] == "CANCELLED" and not body["cancelRequested"] else LATE_CANCEL
    return _rest(response, cancel=True)


def admin_decide(world: World, target: Target) -> str:
    response = world.transport.post_form(
        "admin page",
        f"{INBOX}{target.pause.pk}/change/",
        {"expected_pause_id": str(target.pause.pk), "verdict": "APPROVED", "note": "from the admin"},
    )
    if response.status_code == 302:
        return ACCEPTED if target.kind == "QUORUM" else WON
    if response.status_code == 409:
        return LOST
    return f"admin HTTP {response.status_code}: {response.content[:300]!r}"


def timer_fire(world: World, target: Target) -> str:
    """The timer cluster's task body (``fire_timeout``), run here at the pause's deadline."""
    fired = fire_timeout(str(target.pause.pk), now=target.pause.due_at + timedelta(seconds=1))
    return {"REJECTED": WON, "no-op": LOST}.get(fired, f"timer: {fired}")


def _mcp(result: Any, *, cancel: bool = False) -> str:
    body = json.loads(result.content[0].text)
    if result.is_error:
        return LOST if body.get("errorCode") in ("WRONG_STATE", "CONFLICT") else f"MCP error: {body}"
    if not cancel:
        return VOTED if body.get("status") == "VOTE_RECORDED" else WON
    return {"CANCELLED": CANCELLED, "CANCEL_REQUESTED": LATE_CANCEL}.get(body.get("status"), f"MCP: {body}")


def mcp_resume(world: World, target: Target) -> str:
    if target.kind == "GROUP":
        arguments = {"groupId": target.group_id, "conversationId": target.subject_id, "verdict": "APPROVED"}
        return _mcp(world.transport.mcp("dee", "approve_group_phase", arguments))
    arguments = {"conversationId": target.subject_id, "verdict": "APPROVED"}
    return _mcp(world.transport.mcp("dee", "resume_conversation", arguments))


def mcp_cancel(world: World, target: Target) -> str:
    if target.kind == "GROUP":
        arguments = {"groupId": target.group_id, "conversationId": target.subject_id}
        return _mcp(world.transport.mcp("alice", "cancel_group_discussion", arguments), cancel=True)
    arguments = {"conversationId": target.subject_id}
    return _mcp(world.transport.mcp("alice", "cancel_conversation", arguments), cancel=True)


def slack_click(world: World, target: Target) -> str:
    """A click on the card's Approve button, signed with slack_sdk's signing and posted to the interactions
    endpoint. Slack is always answered 200: what the click did is the card update it queued, then sent (to
    the fake Slack Web API on loopback), "Approved by" or "already resolved"."""
    subject = {"GROUP": f"group:{target.subject_id}", "REQUEST": f"request:{target.subject_id}"}.get(
        target.kind, target.subject_id
    )
    card = str(target.pause.pk)  # the card's message ts, one per round
    payload = {
        "type": "block_actions",
        "user": {"id": "USLACKER"},
        "channel": {"id": "CRACES"},
        "container": {"type": "message", "channel_id": "CRACES", "message_ts": card},
        "actions": [{"action_id": "hitl_approve", "value": f"{world.slack_name}|{subject}"}],
    }
    body = urlencode({"payload": json.dumps(payload)})
    timestamp = str(int(time.time()))
    signature = SignatureVerifier(SIGNING_SECRET).generate_signature(timestamp=timestamp, body=body)
    headers = {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature}
    response = world.transport.post_form("slack", "/integrations/slack/interactive", body, headers)
    if response.status_code != 200:
        return f"Slack HTTP {response.status_code}: {response.content[:300]!r}"
    run_queued_tasks(
        only=ANSWER_TASK
    )  # the card's update, posted after Slack was answered, as the q-cluster does
    texts = [u["text"] for u in world.slack.updates() if u.get("ts") == card]
    if texts == ["✅ Approved by <@USLACKER>"]:
        return WON
    if len(texts) == 1 and texts[0].startswith("✅ <@USLACKER> approved: 1 of 2 approvals"):
        return VOTED
    if texts == [ALREADY_RESOLVED]:
        return LOST
    return f"Slack card updates: {texts}"


SURFACES: dict[str, Callable[[World, Target], str]] = {
    "REST resume APPROVED": rest_resume("APPROVED", "ann"),
    "REST resume REJECTED": rest_resume("REJECTED", "ben"),
    "REST cancel": rest_cancel,
    "admin decide": admin_decide,
    "timer fire": timer_fire,
    "MCP resume": mcp_resume,
    "MCP cancel": mcp_cancel,
    "Slack click": slack_click,
}
# the audit entry's actor of each surface's decision
ACTORS = {
    "ann": "REST resume APPROVED",
    "ben": "REST resume REJECTED",
    "alice": "REST cancel",
    "cid": "admin decide",
    "system:timeout": "timer fire",
    "mcp:dee": "MCP resume",
    "mcp:alice": "MCP cancel",
    "slack:USLACKER": "Slack click",
}


# --- an approval request's surfaces --------------------------------------------------------------------


def request_decide(verdict: str, who: str) -> Callable[[World, Target], str]:
    """A reviewer's ``POST /approval-requests/{id}/decision``."""

    def decide(world: World, target: Target) -> str:
        path = f"/approval-requests/{target.subject_id}/decision"
        return _rest(world.transport.post_json(who, path, {"verdict": verdict}))

    return decide


def _withdrawal(body: dict[str, Any]) -> str:
    """A cancel's 200: it ended the pending request (its pause's cancel won), or it withdrew an approved
    one nobody claimed (the decision came first: the answer's decision is the approval)."""
    verdict = (body.get("decision") or {}).get("verdict")
    if body.get("status") == RequestStatus.CANCELLED and verdict == Verdict.CANCELLED:
        return CANCELLED
    if body.get("status") == RequestStatus.CANCELLED and verdict == Verdict.APPROVED:
        return LATE_CANCEL
    return f"cancel answered with status {body.get('status')}, decision {verdict}"


def request_cancel_by_the_service_account(world: World, target: Target) -> str:
    response = world.transport.post_json(SERVICE_ACCOUNT, f"/approval-requests/{target.subject_id}/cancel")
    return _withdrawal(response.json()) if response.status_code == 200 else _rest(response, cancel=True)


def request_mcp_decide_edited(world: World, target: Target) -> str:
    """MCP's ``decide_approval_request``: an approval of other arguments."""
    arguments = {
        "requestId": target.subject_id,
        "verdict": "APPROVED",
        "amendedArguments": {"orderId": "A-1", "amount": 100},
    }
    return _mcp(world.transport.mcp("dee", "decide_approval_request", arguments))


def request_mcp_cancel(world: World, target: Target) -> str:
    """MCP's ``cancel_approval_request`` by the person the request was made for."""
    result = world.transport.mcp("alice", "cancel_approval_request", {"requestId": target.subject_id})
    if result.is_error:
        return _mcp(result)
    return _withdrawal(json.loads(result.content[0].text))


REQUEST_SURFACES: dict[str, Callable[[World, Target], str]] = {
    "REST decision APPROVED": request_decide("APPROVED", "ann"),
    "REST decision REJECTED": request_decide("REJECTED", "ben"),
    "REST cancel by the service account": request_cancel_by_the_service_account,
    "admin decide": admin_decide,
    "timer fire": timer_fire,
    "MCP decision edited": request_mcp_decide_edited,
    "MCP cancel by the person": request_mcp_cancel,
    "Slack click": slack_click,
}
REQUEST_ACTORS = {
    "ann": "REST decision APPROVED",
    "ben": "REST decision REJECTED",
    SERVICE_ACCOUNT: "REST cancel by the service account",
    "cid": "admin decide",
    "system:timeout": "timer fire",
    "mcp:dee": "MCP decision edited",
    "mcp:alice": "MCP cancel by the person",
    "slack:USLACKER": "Slack click",
}


def surfaces_of(kind: str) -> dict[str, Callable[[World, Target], str]]:
    return REQUEST_SURFACES if kind == "REQUEST" else SURFACES


def actors_of(kind: str) -> dict[str, str]:
    return REQUEST_ACTORS if kind == "REQUEST" else ACTORS


# --- the racers --------------------------------------------------------------------------------------


class Racers:
    """Eight threads that live for the whole run; each round, one barrier releases all of them. Racer ``i``
    takes the ``i``-th surface of the round's kind (``surfaces_of``)."""

    def __init__(self, world: World, count: int = RACERS) -> None:
        self.world = world
        self.start, self.done = threading.Barrier(count + 1), threading.Barrier(count + 1)
        self.target: Target | None = None
        self.answers: dict[str, str] = {}
        self.delays: dict[str, float] = {}
        self.seconds: Counter = Counter()  # each surface's time in its calls, over the run
        self.cpu: Counter = Counter()  # and the CPU time its thread spent on them
        self.stopping = False
        self.threads = [
            threading.Thread(target=self._run, args=(slot,), daemon=True, name=f"racer {slot}")
            for slot in range(count)
        ]
        for thread in self.threads:
            thread.start()

    def _run(self, slot: int) -> None:
        try:
            while True:
                self.start.wait(timeout=120)
                if self.stopping:
                    return
                assert self.target is not None
                name, call = list(surfaces_of(self.target.kind).items())[slot]
                time.sleep(self.delays.get(name, 0.0))
                began, cpu = time.monotonic(), time.thread_time()
                try:
                    self.answers[name] = call(self.world, self.target)
                except Exception as exc:  # an exception is a finding, reported as the answer
                    self.answers[name] = f"raised {type(exc).__name__}: {exc}"
                self.seconds[name] += time.monotonic() - began
                self.cpu[name] += time.thread_time() - cpu
                self.done.wait(timeout=120)
        finally:
            connections.close_all()  # each racer's own connection

    def release(self, target: Target, delays: dict[str, float] | None = None) -> None:
        """Start a round: every racer at once, or after its ``delays`` (seconds)."""
        self.target, self.answers, self.delays = target, {}, delays or {}
        self.start.wait(timeout=120)  # all eight go at once

    def answered(self) -> dict[str, str]:
        self.done.wait(timeout=120)
        return dict(self.answers)

    def stop(self) -> None:
        self.stopping = True
        self.start.wait(timeout=120)
        for thread in self.threads:
            thread.join(timeout=30)


@dataclass
class Round:
    number: int
    kind: str
    answers: dict[str, str]
    status: str
    decided_by: list[str]
    setup_seconds: float = 0.0
    race_seconds: float = 0.0
    subject_problems: list[str] = field(default_factory=list)  # an approval request's status vs its pause

    @property
    def db_winners(self) -> int:
        return len(self.decided_by)

    @property
    def answer_winners(self) -> list[str]:
        """Who the answers say decided: the deciders that won; when none did, the accepted cancels."""
        won = [name for name, answer in self.answers.items() if answer == WON]
        return won or [name for name, answer in self.answers.items() if answer == CANCELLED]

    @property
    def errors(self) -> list[str]:
        clear = (WON, LOST, CANCELLED, LATE_CANCEL, VOTED)
        return [f"{name}: {a}" for name, a in self.answers.items() if a not in clear]

    def problems(self) -> list[str]:
        """What breaks the rule in this round (empty: exactly one decision, told to exactly one racer)."""
        found = []
        if self.status == PauseStatus.PENDING:
            found.append("the pause is still pending")
        if self.db_winners != 1:
            found.append(f"{self.db_winners} decision audit entries ({self.decided_by})")
        winner = actors_of(self.kind).get(self.decided_by[0]) if self.db_winners == 1 else None
        if self.answer_winners != [winner]:
            found.append(f"answers say {self.answer_winners} won, the database says {winner}")
        cancels = [name for name, a in self.answers.items() if a in (CANCELLED, LATE_CANCEL)]
        if any("cancel" not in name for name in cancels):
            found.append(f"a cancel's answer from a decider: {cancels}")
        found.extend(self.subject_problems)
        found.extend(self.errors)
        return found


@dataclass
class Summary:
    rounds: list[Round] = field(default_factory=list)
    elapsed: float = 0.0
    cpu: float = 0.0  # this process's CPU time (every thread), PostgreSQL's not included
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    surface_seconds: Counter = field(default_factory=Counter)
    surface_cpu: Counter = field(default_factory=Counter)

    @property
    def histogram(self) -> Counter:
        """Rounds by number of winners (from the database)."""
        return Counter(r.db_winners for r in self.rounds)

    @property
    def wins_by_surface(self) -> Counter:
        return Counter(
            actors_of(r.kind).get(r.decided_by[0], r.decided_by[0]) for r in self.rounds if r.db_winners == 1
        )

    @property
    def bad_rounds(self) -> list[Round]:
        return [r for r in self.rounds if r.problems()]

    def report(self) -> str:
        kinds = Counter(r.kind for r in self.rounds)
        lines = [
            f"rounds: {len(self.rounds)} × {RACERS} racers ({dict(kinds)})",
            f"winners per round (database): {dict(sorted(self.histogram.items()))}",
            f"wins by surface: {dict(self.wins_by_surface.most_common())}",
            f"rounds breaking the rule: {len(self.bad_rounds)}",
            f"errors (5xx, exceptions, unclear answers): {sum(len(r.errors) for r in self.rounds)}",
            f"elapsed: {self.elapsed:.1f} s ({self.elapsed / max(1, len(self.rounds)):.3f} s/round, "
            f"CPU {self.cpu:.1f} s); "
            f"load average {self.load[0]:.2f} {self.load[1]:.2f} {self.load[2]:.2f}",
        ]
        for kind in sorted(kinds):
            of_kind = [r for r in self.rounds if r.kind == kind]
            setup = sum(r.setup_seconds for r in of_kind) / len(of_kind)
            race = sum(r.race_seconds for r in of_kind) / len(of_kind)
            lines.append(
                f"  {kind}: the race {race:.3f} s, opening the next pause beside it {setup:.3f} s (mean)"
            )
        per_round = {k: round(v / max(1, len(self.rounds)), 3) for k, v in self.surface_seconds.most_common()}
        lines.append(f"  seconds per round in each surface's call: {per_round}")
        cpu = {k: round(v / max(1, len(self.rounds)), 3) for k, v in self.surface_cpu.most_common()}
        lines.append(f"  CPU seconds per round in each surface's call: {cpu}")
        for bad in self.bad_rounds[:10]:
            lines.append(f"  round {bad.number} ({bad.kind}): {'; '.join(bad.problems())}")
        return "\n".join(lines)


def head_starts(number: int, window: float = HEAD_START, kind: str = KINDS[0]) -> dict[str, float]:
    """When each racer starts in round ``number`` (seconds after the barrier). Even rounds: all at once,
    where the shortest path (the timer: no request to parse) wins most. Odd rounds: one racer, in turn,
    at once and the others at random points of the next ``window`` seconds (seeded by the round), so every
    surface also wins some rounds with the rest arriving while its transaction is open."""
    if number % 2 == 0:
        return {}
    names = list(surfaces_of(kind))
    favourite = names[(number // 2) % len(names)]
    rng = random.Random(number)
    return {name: rng.uniform(0, window) for name in names if name != favourite}


def judge(number: int, target: Target, answers: dict[str, str]) -> Round:
    status, verdict = Pause.objects.filter(pk=target.pause.pk).values_list("status", "verdict").get()
    decided_by = list(
        AuditEntry.objects.filter(pause_id=target.pause.pk, verb="hitl.approval")
        .order_by("id")
        .values_list("actor", flat=True)
    )
    if target.kind == "QUORUM":
        answers, quorum = quorum_answers(target, verdict, decided_by, answers)
    judged = Round(number, target.kind, answers, status, decided_by)
    if target.kind == "REQUEST":
        judged.subject_problems = request_problems(target, verdict, answers)
    if target.kind == "QUORUM":
        judged.subject_problems = quorum
    return judged


def quorum_answers(
    target: Target, verdict: str, decided_by: list[str], answers: dict[str, str]
) -> tuple[dict[str, str], list[str]]:
    """A pause that needs two approvals: the admin page's accepted approval read from the database (the
    vote or the decision it was), and what must hold: each vote is one racer's answered vote, or the
    decision; an approval decided it only as the second vote; no more votes than two."""
    votes = list(Vote.objects.filter(pause=target.pause).values_list("voter", flat=True))
    actors = actors_of(target.kind)
    if answers.get("admin decide") == ACCEPTED:
        answers = {
            **answers,
            "admin decide": WON if decided_by == ["cid"] else VOTED if "cid" in votes else LOST,
        }
    found = []
    voted = sorted(name for name, answer in answers.items() if answer == VOTED)
    winner_votes = [voter for voter in votes if decided_by == [voter]]
    expected = sorted(actors[voter] for voter in votes if voter not in winner_votes)
    if voted != expected:
        found.append(f"votes recorded {votes} (decided by {decided_by}), answered as votes {voted}")
    if verdict == Verdict.APPROVED and decided_by and decided_by[0] != "system:timeout" and len(votes) != 2:
        found.append(f"approved by {decided_by} with {len(votes)} votes")
    if len(votes) > 2:
        found.append(f"{len(votes)} votes for a quorum of two")
    return answers, found


# what an approval request's status must be after its pause's one decision (a withdrawal aside)
REQUEST_STATUS_OF = {
    Verdict.APPROVED: RequestStatus.APPROVED,
    Verdict.REJECTED: RequestStatus.REJECTED,
    Verdict.CANCELLED: RequestStatus.CANCELLED,
}


def request_problems(target: Target, verdict: str, answers: dict[str, str]) -> list[str]:
    """The approval request says what its pause's decision said; only an approval can be withdrawn after
    it, once, by a cancel that was told it came late."""
    request = ApprovalRequest.objects.get(pk=target.subject_id)
    withdrawn = AuditEntry.objects.filter(subject_id=target.subject_id, verb="hitl.request.withdrawn").count()
    late = [name for name, answer in answers.items() if answer == LATE_CANCEL]
    found = []
    if verdict == Verdict.APPROVED and withdrawn:
        if request.status != RequestStatus.CANCELLED or withdrawn != 1 or len(late) != 1:
            found.append(f"approved, then {request.status} with {withdrawn} withdrawals ({late} came late)")
    elif request.status != REQUEST_STATUS_OF.get(verdict) or withdrawn or late:
        found.append(
            f"the pause says {verdict}, the request {request.status} ({withdrawn} withdrawals, {late})"
        )
    if verdict == Verdict.APPROVED and request.approved_arguments is None:
        found.append("approved with nothing granted")
    return found


def run_rounds(world: World, rounds: int, kinds: tuple[str, ...] = KINDS) -> Summary:
    import os

    summary = Summary()
    racers = Racers(world)
    began, cpu = time.monotonic(), time.process_time()
    try:
        target = open_pause(world, kinds[0])
        for number in range(rounds):
            raced = time.monotonic()
            racers.release(target, head_starts(number, world.transport.head_start, target.kind))
            # the next round's pause opens while this one is raced: its turn is one more process at work
            opened = time.monotonic()
            following = open_pause(world, kinds[(number + 1) % len(kinds)]) if number + 1 < rounds else None
            setup = time.monotonic() - opened
            judged = judge(number, target, racers.answered())
            judged.setup_seconds, judged.race_seconds = setup, time.monotonic() - raced
            summary.rounds.append(judged)
            target = following
    finally:
        racers.stop()
        summary.surface_seconds, summary.surface_cpu = racers.seconds, racers.cpu
    summary.elapsed, summary.cpu = time.monotonic() - began, time.process_time() - cpu
    summary.load = os.getloadavg()
    return summary


def tool_server() -> SimpleNamespace:
    """A loopback server the payments agent's approved transfers go to (answers 200 {"ok": true})."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            payload = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return SimpleNamespace(url=f"http://127.0.0.1:{server.server_port}", server=server)


class OverHttp:
    """The racers over HTTP against live web processes (``base_urls``, each its own uvicorn): httpx with
    each user's token, the admin page logged in through its login form (session and CSRF cookies), the
    real ``mcp`` client over streamable HTTP (one session per call), Slack's signed POST. The racers are
    spread over the servers, so every round is decided across processes."""

    head_start = 0.5  # an MCP call over HTTP is three requests (initialize, initialized, the call)
    SERVER_OF = {
        "ann": 0,
        "alice": 0,
        "mcp dee": 0,
        "slack": 0,
        "ben": 1,
        "admin page": 1,
        "mcp alice": 1,
        SERVICE_ACCOUNT: 1,
    }

    def __init__(self, world: World, base_urls: list[str]) -> None:
        import httpx
        from rest_framework.authtoken.models import Token

        self.base_urls = base_urls
        self.tokens = {name: Token.objects.get(user=user).key for name, user in world.users.items()}
        self.clients: dict[str, httpx.Client] = {}
        for who, server in self.SERVER_OF.items():
            token = self.tokens.get(who)
            headers = {"Authorization": f"Token {token}"} if token and not who.startswith("mcp") else {}
            self.clients[who] = httpx.Client(base_url=base_urls[server], headers=headers, timeout=60.0)
        self._log_in(self.clients["admin page"], world.users["cid"].get_username())

    @staticmethod
    def _log_in(client: Any, username: str) -> None:
        client.get("/admin/login/")
        answer = client.post(
            "/admin/login/",
            data={
                "username": username,
                "password": f"pw-{username}",  # harnesses.users.make_user's
                "csrfmiddlewaretoken": client.cookies["csrftoken"],
                "next": "/admin/",
            },
        )
        assert answer.status_code == 302 and "sessionid" in client.cookies, answer.text[:500]

    def post_json(self, who: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.clients[who].post(path, json=body) if body is not None else self.clients[who].post(path)

    def post_form(self, who: str, path: str, data: Any, headers: dict[str, str] | None = None) -> Any:
        client = self.clients[who]
        if isinstance(data, str):
            form = {"Content-Type": "application/x-www-form-urlencoded"}
            return client.post(path, content=data, headers=form | (headers or {}))
        return client.post(path, data=data | {"csrfmiddlewaretoken": client.cookies["csrftoken"]})

    def mcp(self, who: str, tool: str, arguments: dict[str, Any]) -> Any:
        import asyncio

        url = f"{self.base_urls[self.SERVER_OF[f'mcp {who}']]}/mcp"
        return asyncio.run(asyncio.wait_for(_mcp_over_http(url, self.tokens[who], tool, arguments), 60))

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


async def _mcp_over_http(url: str, token: str, tool: str, arguments: dict[str, Any]) -> Any:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(
        headers={"Authorization": f"Token {token}"}, timeout=httpx2.Timeout(60.0)
    ) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await session.call_tool(tool, arguments)
