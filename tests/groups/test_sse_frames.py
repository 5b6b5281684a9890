"""The SSE bridge of groups.sse: frames, the closing rule, keep-alives and errors, over services that are
plain functions run in the bridge's worker thread (the live streams: tests/e2e/test_live_discussion_streams.py)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

from common.errors import WrongState
from groups import events as ev
from groups import sse

CAP_SECONDS = 5.0
PROGRESS = (ev.PHASE_STARTED, {"phaseIndex": 0})
PAUSED = (ev.AWAITING_APPROVAL, {"phaseIndex": 0})
NEVER = sse.error_event(500, "INTERNAL", "unused fallback")


def read(run: sse.StreamRun, **kwargs: Any) -> list[bytes]:
    """Every frame of the stream, within CAP_SECONDS."""
    kwargs.setdefault("keepalive_seconds", 10.0)

    async def collect() -> list[bytes]:
        return [chunk async for chunk in sse.event_frames(run, **kwargs)]

    return asyncio.run(asyncio.wait_for(collect(), CAP_SECONDS))


def parsed(frames: list[bytes]) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in frames:
        if chunk == sse.KEEP_ALIVE:
            continue
        lines = chunk.decode().split("\n")
        assert lines[0].startswith("event: ") and lines[1].startswith("data: ") and lines[2:] == ["", ""]
        events.append((lines[0][len("event: ") :], json.loads(lines[1][len("data: ") :])))
    return events


def test_a_frame_is_the_event_name_and_its_data_on_one_line_of_json():
    chunk = sse.frame("member_answered", {"content": "two\nlines", "member": None})

    assert chunk == b'event: member_answered\ndata: {"content":"two\\nlines","member":null}\n\n'


def test_the_stream_ends_at_its_closing_event_and_drops_what_follows():
    def run(sink: ev.EventSink) -> sse.Event:
        sink(*PROGRESS)
        sink(*PAUSED)
        sink(ev.MEMBER_ANSWERED, {"late": True})
        return NEVER

    assert parsed(read(run)) == [PROGRESS, PAUSED]


@pytest.mark.parametrize("name", [ev.HITL_RESUME, ev.MEMBER_PAUSE_SKIPPED, ev.TASK_STATUS])
def test_resume_skip_and_progress_events_do_not_close_the_stream(name):
    def run(sink: ev.EventSink) -> sse.Event:
        sink(name, {})
        sink(ev.GROUP_COMPLETE, {"state": "COMPLETED"})
        return NEVER

    assert [event for event, _ in parsed(read(run))] == [name, ev.GROUP_COMPLETE]


def test_a_service_that_raises_an_application_error_closes_with_its_group_error():
    def run(sink: ev.EventSink) -> sse.Event:
        sink(*PROGRESS)
        raise WrongState("Group conversation is not awaiting approval", current_state="COMPLETED")

    assert parsed(read(run)) == [
        PROGRESS,
        (
            ev.GROUP_ERROR,
            {
                "status": 409,
                "code": "WRONG_STATE",
                "message": "Group conversation is not awaiting approval",
                "currentState": "COMPLETED",
            },
        ),
    ]


def test_any_other_exception_closes_with_a_server_error_and_no_detail(caplog):
    def run(sink: ev.EventSink) -> sse.Event:
        raise KeyError("secret internals")

    assert parsed(read(run)) == [
        (ev.GROUP_ERROR, {"status": 500, "code": "INTERNAL", "message": sse.SERVER_ERROR})
    ]
    assert "a streamed group discussion failed" in caplog.text


def test_a_service_that_sent_no_closing_event_closes_with_the_one_it_returns():
    def run(sink: ev.EventSink) -> sse.Event:
        sink(ev.HITL_RESUME, {"verdict": "APPROVED"})
        return ev.QUEUED, {"state": "IN_PROGRESS"}

    assert parsed(read(run)) == [
        (ev.HITL_RESUME, {"verdict": "APPROVED"}),
        (ev.QUEUED, {"state": "IN_PROGRESS"}),
    ]


def test_keep_alive_comments_go_out_while_nothing_happens():
    def run(sink: ev.EventSink) -> sse.Event:
        sink(*PROGRESS)
        time.sleep(0.45)
        sink(*PAUSED)
        return NEVER

    frames = read(run, keepalive_seconds=0.1)

    assert frames[0] == sse.frame(*PROGRESS) and frames[-1] == sse.frame(*PAUSED)
    assert set(frames[1:-1]) == {sse.KEEP_ALIVE} and len(frames[1:-1]) >= 3


def test_the_stream_ends_once_the_service_returned_after_its_closing_event():
    returned = threading.Event()

    def run(sink: ev.EventSink) -> sse.Event:
        sink(*PAUSED)
        time.sleep(0.2)  # what the service commits after its last event (a pause restored)
        returned.set()
        return NEVER

    frames = read(run, keepalive_seconds=0.05)

    assert frames == [sse.frame(*PAUSED)]  # no keep-alive after the closing event
    assert returned.is_set()


def test_a_service_slow_to_return_after_its_closing_event_is_not_waited_for_beyond_the_grace():
    release = threading.Event()

    def run(sink: ev.EventSink) -> sse.Event:
        sink(*PAUSED)
        release.wait(CAP_SECONDS)
        return NEVER

    started = time.monotonic()
    try:
        frames = read(run, close_grace_seconds=0.2)
    finally:
        release.set()

    assert frames == [sse.frame(*PAUSED)]
    assert time.monotonic() - started < 2.0


def test_a_client_that_goes_away_stops_the_stream_not_the_service():
    finished = threading.Event()
    release = threading.Event()

    def run(sink: ev.EventSink) -> sse.Event:
        sink(*PROGRESS)
        release.wait(CAP_SECONDS)
        sink(ev.MEMBER_ANSWERED, {})  # nobody listens: dropped, and the service goes on
        finished.set()
        return NEVER

    async def first_frame_then_leave() -> bytes:
        frames = sse.event_frames(run, keepalive_seconds=10.0)
        first = await anext(frames)
        await frames.aclose()
        return first

    assert asyncio.run(asyncio.wait_for(first_frame_then_leave(), CAP_SECONDS)) == sse.frame(*PROGRESS)
    release.set()
    assert finished.wait(CAP_SECONDS)
