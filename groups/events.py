"""What a running discussion tells whoever watches it (the SSE streams of groups.api.stream_views).

The runner calls an ``EventSink`` with an event name and a JSON-ready dict at every step; the REST
adapters that answer once pass ``no_events``. Event names are the wire names (docs/groups.md, "SSE").
The closing events end a stream: after one of them nothing more is sent.

Besides the run's own sink, every event of every run goes to the process-wide observers (registered in
an AppConfig.ready()): a surface that must hear of a discussion's progress whichever process runs it (the
Slack adapter's thread notices, for a continuation run in a REST request or on a q-cluster worker)
observes here, since the sink belongs to whoever started or decided that run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

EventSink = Callable[[str, dict[str, Any]], None]

DISCUSSION_STARTED = "discussion_started"
PHASE_STARTED = "phase_started"
MEMBER_ANSWERED = "member_answered"
TASK_STATUS = "task_status"
MEMBER_PAUSE_SKIPPED = "member_pause_skipped"
AWAITING_APPROVAL = "awaiting_approval"
HITL_RESUME = "hitl_resume"
CANCELLED = "cancelled"
GROUP_COMPLETE = "group_complete"
GROUP_ERROR = "group_error"
# Sent by the approve stream only, never by the runner: the decision was recorded and its continuation
# handed to the q-cluster (HITL_CONTINUE_INLINE off), so this stream has nothing more to tell.
QUEUED = "queued"
VOTE_RECORDED = "vote_recorded"  # one approval of several: the discussion still waits (approvals.votes)

CLOSING_EVENTS = frozenset({AWAITING_APPROVAL, CANCELLED, GROUP_COMPLETE, GROUP_ERROR, QUEUED, VOTE_RECORDED})


def no_events(name: str, data: dict[str, Any]) -> None:
    """The sink of a caller nobody watches."""


_OBSERVERS: list[EventSink] = []


def register_observer(observer: EventSink) -> None:
    """Hear every event of every discussion run in this process (after the run's sink)."""
    if observer not in _OBSERVERS:
        _OBSERVERS.append(observer)


def observers() -> list[EventSink]:
    return _OBSERVERS


_WATCHER: ContextVar[EventSink] = ContextVar("discussion_events", default=no_events)


@contextmanager
def watched_by(sink: EventSink) -> Iterator[None]:
    """Send the events of discussions run in this context (a decision's continuation) to ``sink``."""
    token = _WATCHER.set(sink)
    try:
        yield
    finally:
        _WATCHER.reset(token)


def current_sink() -> EventSink:
    return _WATCHER.get()
