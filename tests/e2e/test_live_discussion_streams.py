"""The SSE streams of group discussions, read with httpx's streaming client from a live uvicorn.

The server runs without q-clusters (a discussion and its inline continuation run in the web process)
and sends a keep-alive after 0.2 idle seconds, so a slow member turn shows them quickly. Every read is
capped twice: httpx's timeouts and an overall deadline per stream.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from approvals.models import Pause, PauseStatus, SubjectType
from conversations.agents import create_agent
from groups.demo_group import demo_member_document
from groups.discussion_decisions import DECISION_REQUIRED
from groups.member_turns import MEMBER_PAUSE_NOTE
from groups.models import GroupConversation
from harnesses import clusters as live_clusters
from harnesses.factories import deployed_agent
from harnesses.live_stack import LiveStack, api_user, eventually, running_stack
from harnesses.members import answering, group, pausing

pytestmark = pytest.mark.django_db(transaction=True)

slow_target = live_clusters.slow_target

KEEPALIVE_SECONDS = "0.2"
STREAM_DEADLINE = 20.0
TIMEOUT = httpx.Timeout(10.0, read=5.0)
PROBLEM = "application/problem+json"
SSE = {"Accept": "text/event-stream"}
GATED = [
    {"name": "Opinions", "type": "OPINION"},
    {"name": "Challenge", "type": "CHALLENGE", "requiresApproval": True},
    {"name": "Decision", "type": "SYNTHESIS"},
]
APPROVE = {"decision": {"verdict": "APPROVED", "note": "go on"}}
KEEP_ALIVE = ":keep-alive"


@pytest.fixture(scope="module")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveStack]:
    yield from running_stack(
        django_db_blocker,
        tmp_path_factory.mktemp("stream-stack"),
        qclusters=False,
        HITL_SSE_KEEPALIVE_SECONDS=KEEPALIVE_SECONDS,
    )


@dataclass
class Stream:
    """What one POST answered: its status and headers, and for a 200 every event (name, data) in order,
    ``seen`` with the keep-alive comments among them, and whether the server ended it."""

    status: int
    headers: httpx.Headers
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    seen_at: list[float] = field(default_factory=list)  # time.monotonic() when each of ``seen`` arrived
    ended: bool = False
    problem: dict[str, Any] | None = None

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def last(self, name: str) -> dict[str, Any]:
        return [data for event, data in self.events if event == name][-1]


def stream(client: httpx.Client, path: str, body: Any = None, *, content: bytes | None = None) -> Stream:
    """POST ``path`` accepting only text/event-stream and read the answer to its end (or fail at the
    deadline). A frame is ``event:``/``data:`` lines ended by a blank line; a ``:`` line is a comment."""
    deadline = time.monotonic() + STREAM_DEADLINE
    kwargs: dict[str, Any] = (
        {"content": content, "headers": SSE | {"Content-Type": "application/json"}}
        if content is not None
        else {"json": body, "headers": SSE}
    )
    with client.stream("POST", path, timeout=TIMEOUT, **kwargs) as response:
        result = Stream(response.status_code, response.headers)
        if response.status_code != 200:
            response.read()
            result.problem = response.json()
            return result
        name, data = None, None
        for line in response.iter_lines():
            if time.monotonic() > deadline:
                pytest.fail(f"{path}: the stream was still open after {STREAM_DEADLINE:.0f}s: {result.seen}")
            if line.startswith(":"):
                result.seen.append(line.replace(" ", ""))
                result.seen_at.append(time.monotonic())
            elif line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: ") :])
            elif line == "" and name is not None:
                result.events.append((name, data))
                result.seen.append(name)
                result.seen_at.append(time.monotonic())
                name, data = None, None
        result.ended = True
    return result


def paused_discussion(owner: httpx.Client, group_id: str) -> dict[str, Any]:
    started = owner.post(f"/groups/{group_id}/conversations", json={"question": "Ship on Friday?"})
    assert started.status_code == 201, started.text
    assert started.json()["state"] == "AWAITING_APPROVAL", started.json()
    return started.json()


def approve_path(discussion: dict[str, Any]) -> str:
    return f"/groups/{discussion['groupId']}/conversations/{discussion['discussionId']}/approve/stream"


def slow_member(target_url: str) -> str:
    """A deployed member whose every turn waits on an HTTP call to ``target_url`` before it answers."""
    document = demo_member_document("slow", "Done, slowly.")
    document["workflows"][0]["tasks"].insert(
        1,
        {
            "id": "lookup",
            "type": "httpcalls",
            "targetServerUrl": target_url,
            "calls": [
                {"name": "lookup", "actions": ["answer"], "request": {"method": "GET", "path": "/slow"}}
            ],
        },
    )
    return deployed_agent(document)


def assert_streamed(result: Stream) -> None:
    assert result.status == 200, result.problem
    assert result.headers["content-type"] == "text/event-stream"
    assert result.headers["cache-control"] == "no-cache"
    assert result.headers["x-accel-buffering"] == "no"
    assert result.ended


def test_start_stream_tells_every_step_and_closes_at_the_approval_gate(people):
    pat, carla = answering("pat", "Ship it."), answering("carla", "Not on a Friday.")
    group_id = group([(pat, "Optimist"), (carla, "Critic")], GATED)

    result = stream(people["alice"], f"/groups/{group_id}/conversations/stream", {"question": "Friday?"})

    assert_streamed(result)
    assert result.names == [
        "discussion_started",
        "phase_started",
        "member_answered",
        "member_answered",
        "phase_started",
        "member_answered",
        "member_answered",
        "awaiting_approval",
    ]
    discussion_id = result.events[0][1]["discussionId"]
    assert {data["discussionId"] for _, data in result.events} == {discussion_id}
    assert [(d["phase"], d["member"], d["status"]) for n, d in result.events if n == "member_answered"] == [
        ("Opinions", pat, "OK"),
        ("Opinions", carla, "OK"),
        ("Challenge", pat, "OK"),
        ("Challenge", carla, "OK"),
    ]
    paused = result.last("awaiting_approval")
    assert paused["phaseName"] == "Challenge" and paused["pauseType"] == "PHASE"
    assert paused["reason"] == "Requires human approval (PHASE) — phase: Challenge"
    read = people["alice"].get(f"/groups/{group_id}/conversations/{discussion_id}")
    assert read.json()["state"] == "AWAITING_APPROVAL"


def test_approve_stream_resumes_runs_the_rest_and_closes_when_it_completes(people):
    pat, carla = answering("pat", "Ship it."), answering("carla", "Not on a Friday.")
    discussion = paused_discussion(people["alice"], group([(pat, "Optimist"), (carla, "Critic")], GATED))

    result = stream(people["approver"], approve_path(discussion), APPROVE)

    assert_streamed(result)
    assert result.names == [
        "hitl_resume",
        "phase_started",
        "member_answered",
        "member_answered",
        "group_complete",
    ]
    assert result.last("hitl_resume") == {
        "discussionId": discussion["discussionId"],
        "verdict": "APPROVED",
        "note": "go on",
        "decidedBy": "approver",
    }
    assert result.last("phase_started")["phaseName"] == "Decision"
    assert result.last("group_complete")["state"] == "COMPLETED"
    # the stream ends after the service returned: what it committed is there to read
    read = people["alice"].get(f"/groups/{discussion['groupId']}/conversations/{discussion['discussionId']}")
    assert read.json()["state"] == "COMPLETED"


@pytest.mark.parametrize(
    ("body", "content"),
    [({"decision": {"verdict": "MAYBE"}}, None), (None, b"{not json")],
    ids=["bad-verdict", "not-json"],
)
def test_a_bad_approve_body_is_a_group_error_event_and_the_pause_stays_pending(people, body, content):
    discussion = paused_discussion(
        people["alice"], group([(answering("pat", "Ship it."), "Optimist")], GATED)
    )

    result = stream(people["approver"], approve_path(discussion), body, content=content)

    assert_streamed(result)
    assert result.names == ["group_error"]
    error = result.last("group_error")
    assert (error["status"], error["code"], error["discussionId"]) == (
        400,
        "BAD_REQUEST",
        discussion["discussionId"],
    )
    if content is None:
        assert error["message"] == DECISION_REQUIRED
    else:
        assert error["errors"][0]["field"] == "body"
    pause = Pause.objects.get(subject_type=SubjectType.DISCUSSION, subject_id=discussion["discussionId"])
    assert pause.status == PauseStatus.PENDING


def test_approve_stream_on_a_discussion_not_awaiting_approval_is_a_409_group_error(people):
    group_id = group([(answering("pat", "Ship it."), "Optimist")], [{"name": "Opinions", "type": "OPINION"}])
    done = people["alice"].post(f"/groups/{group_id}/conversations", json={"question": "Friday?"}).json()
    assert done["state"] == "COMPLETED"

    result = stream(people["approver"], approve_path(done), APPROVE)

    assert_streamed(result)
    assert result.names == ["group_error"]
    error = result.last("group_error")
    assert (error["status"], error["code"], error["currentState"]) == (409, "WRONG_STATE", "COMPLETED")


def test_a_member_pause_is_told_as_member_pause_skipped_and_the_stream_goes_on(people):
    shy, pat = pausing("shy"), answering("pat", "Ship it.")
    group_id = group([(shy, "Approver"), (pat, "Optimist")], [{"name": "Opinions", "type": "OPINION"}])

    result = stream(people["alice"], f"/groups/{group_id}/conversations/stream", {"question": "Friday?"})

    assert_streamed(result)
    assert result.names == [
        "discussion_started",
        "phase_started",
        "member_pause_skipped",
        "member_answered",
        "member_answered",
        "group_complete",
    ]
    skipped = result.last("member_pause_skipped")
    assert (skipped["member"], skipped["note"]) == (shy, MEMBER_PAUSE_NOTE)
    assert [d["status"] for n, d in result.events if n == "member_answered"] == ["SKIPPED", "OK"]


def test_keep_alive_comments_go_out_during_a_slow_member_turn(people, slow_target):
    slow_target.hold_seconds = 1.0
    group_id = group(
        [(slow_member(slow_target.url), "Researcher")], [{"name": "Opinions", "type": "OPINION"}]
    )

    result = stream(people["alice"], f"/groups/{group_id}/conversations/stream", {"question": "Friday?"})

    assert_streamed(result)
    assert result.names == ["discussion_started", "phase_started", "member_answered", "group_complete"]
    assert slow_target.requests, "the member's turn did not call the slow server"
    turn_began, turn_ended = result.seen.index("phase_started"), result.seen.index("member_answered")
    during_turn = result.seen[turn_began + 1 : turn_ended]
    assert during_turn and set(during_turn) == {KEEP_ALIVE}
    assert len(during_turn) >= 3  # at least 1 s held, one every 0.2 s
    # each frame arrives when it is sent, not all of them at the end (a buffered response would)
    assert result.seen_at[turn_ended] - result.seen_at[turn_began] >= 0.8
    assert result.last("member_answered")["status"] == "OK"


def test_a_start_refused_after_the_stream_began_is_a_group_error_and_creates_nothing(people):
    undeployed = str(create_agent(document=demo_member_document("idle", "Hi."), created_by=None).agent_id)
    group_id = group([(answering("pat", "Ship it."), "Optimist"), (undeployed, "Idle")], GATED)

    result = stream(people["alice"], f"/groups/{group_id}/conversations/stream", {"question": "Friday?"})

    assert_streamed(result)
    assert result.names == ["group_error"]
    error = result.last("group_error")
    assert (error["status"], error["code"], error["agentId"]) == (409, "NOT_DEPLOYED", undeployed)
    assert not GroupConversation.objects.exists()


def test_a_client_that_goes_away_stops_its_stream_not_the_discussion(people, slow_target):
    slow_target.hold_seconds = 1.0
    group_id = group([(slow_member(slow_target.url), "Researcher")], GATED[:1])
    path = f"/groups/{group_id}/conversations/stream"

    with people["alice"].stream(
        "POST", path, json={"question": "Friday?"}, headers=SSE, timeout=TIMEOUT
    ) as r:
        first = next(line for line in r.iter_lines() if line.startswith("data: "))
        discussion_id = json.loads(first[len("data: ") :])["discussionId"]
    # the connection is closed while the member's turn still waits on the slow server

    def completed() -> bool:
        body = people["alice"].get(f"/groups/{group_id}/conversations/{discussion_id}").json()
        return body["state"] == "COMPLETED"

    eventually(completed, timeout=15, what="the discussion to run to its end without its client")
    assert len(slow_target.requests) >= 1


def test_refusals_before_the_stream_are_http_problems_even_to_an_sse_client(people):
    group_id = group([(answering("pat", "Ship it."), "Optimist")], GATED)
    discussion = paused_discussion(people["alice"], group_id)
    start_path = f"/groups/{group_id}/conversations/stream"
    unknown_group = "/groups/00000000-0000-4000-8000-000000000000/conversations/stream"

    refusals = [
        (stream(people["anonymous"], start_path, {"question": "Friday?"}), 401, "UNAUTHENTICATED"),
        (stream(people["anonymous"], approve_path(discussion), APPROVE), 401, "UNAUTHENTICATED"),
        (stream(people["bob"], approve_path(discussion), APPROVE), 403, "FORBIDDEN"),
        (stream(people["bob"], approve_path(discussion), {"decision": {}}), 403, "FORBIDDEN"),
        (stream(people["alice"], start_path, {"question": ""}), 400, "BAD_REQUEST"),
        (stream(people["alice"], unknown_group, {"question": "Friday?"}), 404, "NOT_FOUND"),
    ]

    for result, status, code in refusals:
        assert result.status == status, (status, result.problem)
        assert result.headers["content-type"] == PROBLEM
        assert result.problem is not None and result.problem["code"] == code
    assert "WWW-Authenticate" in refusals[0][0].headers
    pause = Pause.objects.get(subject_type=SubjectType.DISCUSSION, subject_id=discussion["discussionId"])
    assert pause.status == PauseStatus.PENDING


def test_a_decision_queued_for_the_q_cluster_closes_with_queued(people, django_db_blocker, tmp_path_factory):
    discussion = paused_discussion(
        people["alice"], group([(answering("pat", "Ship it."), "Optimist")], GATED)
    )
    queue_only = running_stack(
        django_db_blocker,
        tmp_path_factory.mktemp("queue-only"),
        qclusters=False,
        HITL_CONTINUE_INLINE="false",
    )
    stack = next(queue_only)
    try:
        with stack.client(api_user("approver-2", "approver")) as approver:
            result = stream(approver, approve_path(discussion), APPROVE)
    finally:
        queue_only.close()  # stops the server

    assert_streamed(result)
    assert result.names == ["queued"]
    queued = result.last("queued")
    pause = Pause.objects.get(subject_type=SubjectType.DISCUSSION, subject_id=discussion["discussionId"])
    assert (queued["pauseId"], queued["state"]) == (str(pause.pk), "IN_PROGRESS")
    assert pause.status == PauseStatus.RESOLVING and pause.verdict == "APPROVED"
