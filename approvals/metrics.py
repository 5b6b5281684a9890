"""Prometheus meters of the approval service and the one-line calls the domain code makes.

Counting never changes the outcome of a decision: each call is a label lookup and an mmap write,
and any error is logged and swallowed. Labels come from closed vocabularies (anything else is
counted as "unknown"), so a caller's typo cannot grow a new time series per value.

The meters are built on first use, not at import. prometheus_client chooses single- or
multi-process mode the moment it is first imported, from PROMETHEUS_MULTIPROC_DIR, which the
settings set (hitl_project.metrics_setup); importing this module therefore never imports it.
docs/metrics.md says exactly when each meter moves.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

SURFACES = frozenset({"regular", "group", "group-human", "request", "unknown"})
TOOL_VERDICTS = frozenset({"approved", "rejected", "mixed"})
TOOL_GUARDS = frozenset({"pause_cap", "no_progress", "auto_approve_cap"})
WRITE_DECISIONS = frozenset({"approved", "rejected", "timeout"})
CANARY_OUTCOMES = frozenset({"pass", "fail", "unknown"})
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNKNOWN = "unknown"
RULE_MATCH_MAX_CHARS = 200

GATE_VERIFIED = "hitl_operator_gate_verified"
GATE_VERIFIED_HELP = "1 while the operator gate was last reported verified, else 0 (0 until reported)"

CANARY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass(frozen=True)
class Meters:
    pauses: Any
    resumes: Any
    timeouts: Any
    tool_resumes: Any
    tool_guards: Any
    rules_matched: Any
    write_approvals: Any
    canaries: Any
    canary_duration: Any
    gate_verified: Any
    http_requests: Any
    http_request_duration: Any
    member_pauses_skipped: Any


_meters: Meters | None = None
_build_lock = threading.Lock()
_reported_strays: set[tuple[str, str]] = set()
_reported_failures: set[str] = set()


def _build() -> Meters:
    from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

    # *_created samples only exist in single-process mode; drop them so both modes expose the same.
    disable_created_metrics()
    return Meters(
        pauses=Counter("hitl_pauses", "Pauses committed", ["surface"]),
        resumes=Counter("hitl_resumes", "Decisions that resumed a pause", ["surface"]),
        timeouts=Counter("hitl_timeouts", "Pause timers fired, no-ops included", ["surface"]),
        tool_resumes=Counter("hitl_tool_resumes", "Tool-call pauses resumed", ["verdict"]),
        tool_guards=Counter("hitl_tool_guard", "Tool-loop guards that fired", ["guard"]),
        rules_matched=Counter("hitl_rule_matched", "Distinct tool rules matched per pause", ["match"]),
        write_approvals=Counter("hitl_write_approvals", "Verdicts applied to gated calls", ["decision"]),
        canaries=Counter("hitl_operator_canary", "Operator canary results reported", ["outcome"]),
        canary_duration=Histogram(
            "hitl_operator_canary_duration_seconds",
            "Reported operator canary durations",
            buckets=CANARY_BUCKETS,
        ),
        # mostrecent: the gate state is a fact about the deployment, not about a process. The last
        # report wins whichever process took it, and it survives that process exiting.
        gate_verified=Gauge(GATE_VERIFIED, GATE_VERIFIED_HELP, multiprocess_mode="mostrecent"),
        http_requests=Counter("http_requests", "HTTP requests answered", ["method", "route", "status"]),
        http_request_duration=Histogram(
            "http_request_duration_seconds",
            "Time to produce the response",
            ["method", "route"],
            buckets=REQUEST_BUCKETS,
        ),
        member_pauses_skipped=Counter(
            "hitl_group_member_pause_skipped",
            "Member turns of group discussions skipped because the member paused",
        ),
    )


def meters() -> Meters:
    """This process's meters, built on the first call."""
    global _meters
    if _meters is None:
        with _build_lock:
            if _meters is None:
                _meters = _build()
    return _meters


def _one_of(value: object, allowed: frozenset[str], label: str) -> str:
    try:
        text = str(value).strip().lower()
    except Exception:
        text = UNKNOWN
    if text in allowed:
        return text
    if (label, text) not in _reported_strays and len(_reported_strays) < 100:
        _reported_strays.add((label, text))
        logger.warning(
            "metrics: %s=%r is not one of %s; counted as %r", label, text, sorted(allowed), UNKNOWN
        )
    return UNKNOWN


def _record(what: str, record: Callable[[Meters], object]) -> None:
    try:
        record(meters())
    except Exception:  # a broken meter must never break the decision it describes
        if what not in _reported_failures:
            _reported_failures.add(what)
            logger.exception("metrics: could not record %s (further failures are not logged)", what)


def count_pause(surface: str) -> None:
    label = _one_of(surface, SURFACES, "surface")
    _record("hitl_pauses", lambda m: m.pauses.labels(surface=label).inc())


def count_resume(surface: str) -> None:
    label = _one_of(surface, SURFACES, "surface")
    _record("hitl_resumes", lambda m: m.resumes.labels(surface=label).inc())


def count_timeout(surface: str) -> None:
    label = _one_of(surface, SURFACES, "surface")
    _record("hitl_timeouts", lambda m: m.timeouts.labels(surface=label).inc())


def count_tool_resume(verdict: str) -> None:
    label = _one_of(verdict, TOOL_VERDICTS, "verdict")
    _record("hitl_tool_resumes", lambda m: m.tool_resumes.labels(verdict=label).inc())


def count_tool_guard(guard: str) -> None:
    label = _one_of(guard, TOOL_GUARDS, "guard")
    _record("hitl_tool_guard", lambda m: m.tool_guards.labels(guard=label).inc())


def count_rule_matched(match: str) -> None:
    """The label is the rule's configured pattern (bounded by configuration), never a URL or argument."""
    _record(
        "hitl_rule_matched", lambda m: m.rules_matched.labels(match=str(match)[:RULE_MATCH_MAX_CHARS]).inc()
    )


def count_write_approval(decision: str) -> None:
    label = _one_of(decision, WRITE_DECISIONS, "decision")
    _record("hitl_write_approvals", lambda m: m.write_approvals.labels(decision=label).inc())


def count_member_pause_skipped() -> None:
    """A group member's own pause, cancelled and its turn skipped (group HITL is requiresApproval's)."""
    _record("hitl_group_member_pause_skipped", lambda m: m.member_pauses_skipped.inc())


def record_operator_canary(outcome: str, duration_seconds: float | None) -> None:
    """Counts the reported outcome; observes the duration only when one was reported and is sane."""
    label = _one_of(outcome, CANARY_OUTCOMES, "outcome")

    def record(m: Meters) -> None:
        m.canaries.labels(outcome=label).inc()
        if duration_seconds is not None and math.isfinite(duration_seconds) and duration_seconds >= 0:
            m.canary_duration.observe(duration_seconds)

    _record("hitl_operator_canary", record)


def set_operator_gate_verified(value: bool) -> None:
    _record(GATE_VERIFIED, lambda m: m.gate_verified.set(1 if value else 0))


def record_http_request(*, method: str, route: str, status: int, duration_seconds: float) -> None:
    """One answered request; route is the URL pattern (never the raw path), so ids add no series."""

    def record(m: Meters) -> None:
        method_label = method.upper() if method.upper() in HTTP_METHODS else "other"
        m.http_requests.labels(method=method_label, route=route, status=str(status)).inc()
        m.http_request_duration.labels(method=method_label, route=route).observe(duration_seconds)

    _record("http_requests", record)
