"""Each HITL meter moves exactly the sample it names, as read back from GET /metrics."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from approvals import metrics
from tests.hitl_project.scrape import finish, moved, run_in_process, scrape, value

pytestmark = pytest.mark.urls("tests.hitl_project.urls")

COUNTS: list[tuple[str, Callable[[], None], str, dict[str, str]]] = [
    ("pause-regular", lambda: metrics.count_pause("regular"), "hitl_pauses_total", {"surface": "regular"}),
    ("pause-group", lambda: metrics.count_pause("group"), "hitl_pauses_total", {"surface": "group"}),
    ("resume-regular", lambda: metrics.count_resume("regular"), "hitl_resumes_total", {"surface": "regular"}),
    (
        "timeout-group-human",
        lambda: metrics.count_timeout("group-human"),
        "hitl_timeouts_total",
        {"surface": "group-human"},
    ),
    (
        "timeout-unknown",
        lambda: metrics.count_timeout("unknown"),
        "hitl_timeouts_total",
        {"surface": "unknown"},
    ),
    (
        "tool-resume-mixed",
        lambda: metrics.count_tool_resume("mixed"),
        "hitl_tool_resumes_total",
        {"verdict": "mixed"},
    ),
    (
        "tool-guard",
        lambda: metrics.count_tool_guard("no_progress"),
        "hitl_tool_guard_total",
        {"guard": "no_progress"},
    ),
    (
        "rule-matched",
        lambda: metrics.count_rule_matched("http.post:*"),
        "hitl_rule_matched_total",
        {"match": "http.post:*"},
    ),
    (
        "write-approval-timeout",
        lambda: metrics.count_write_approval("timeout"),
        "hitl_write_approvals_total",
        {"decision": "timeout"},
    ),
    (
        "group-member-pause-skipped",
        metrics.count_member_pause_skipped,
        "hitl_group_member_pause_skipped_total",
        {},
    ),
    (
        "canary-without-duration",
        lambda: metrics.record_operator_canary("pass", None),
        "hitl_operator_canary_total",
        {"outcome": "pass"},
    ),
]


@pytest.mark.parametrize(("count", "name", "labels"), [c[1:] for c in COUNTS], ids=[c[0] for c in COUNTS])
def test_each_count_moves_only_its_own_sample_by_exactly_one(count, name, labels):
    before = scrape()
    count()
    after = scrape()

    assert moved(before, after, prefix="hitl_") == {(name, frozenset(labels.items())): 1.0}


def test_labels_are_accepted_in_any_case():
    before = scrape()
    metrics.count_tool_resume("APPROVED")
    metrics.count_write_approval("Rejected")
    after = scrape()

    assert moved(before, after, prefix="hitl_") == {
        ("hitl_tool_resumes_total", frozenset({("verdict", "approved")})): 1.0,
        ("hitl_write_approvals_total", frozenset({("decision", "rejected")})): 1.0,
    }


def test_a_label_outside_the_vocabulary_is_counted_as_unknown_not_as_a_new_series():
    before = scrape()
    metrics.count_pause("conversation-42")
    after = scrape()

    assert moved(before, after, prefix="hitl_") == {
        ("hitl_pauses_total", frozenset({("surface", "unknown")})): 1.0
    }


def test_a_broken_meter_never_breaks_the_caller(monkeypatch):
    def broken():
        raise OSError("metrics directory is gone")

    monkeypatch.setattr(metrics, "meters", broken)

    metrics.count_pause("regular")
    metrics.record_operator_canary("fail", 1.0)
    metrics.set_operator_gate_verified(True)


def test_a_canary_with_a_duration_is_counted_and_timed():
    before = scrape()
    metrics.record_operator_canary("fail", 2.0)
    after = scrape()

    changes = moved(before, after, prefix="hitl_operator_canary")
    assert changes[("hitl_operator_canary_total", frozenset({("outcome", "fail")}))] == 1.0
    assert changes[("hitl_operator_canary_duration_seconds_count", frozenset())] == 1.0
    assert changes[("hitl_operator_canary_duration_seconds_sum", frozenset())] == 2.0
    assert changes[("hitl_operator_canary_duration_seconds_bucket", frozenset({("le", "2.5")}))] == 1.0
    assert ("hitl_operator_canary_duration_seconds_bucket", frozenset({("le", "1.0")})) not in changes


def test_gate_verified_reads_zero_before_any_report(monkeypatch, tmp_path):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # a host where nothing was reported

    assert value(scrape(), "hitl_operator_gate_verified") == 0.0


def test_gate_verified_follows_the_latest_report():
    metrics.set_operator_gate_verified(True)
    assert value(scrape(), "hitl_operator_gate_verified") == 1.0

    metrics.set_operator_gate_verified(False)
    assert value(scrape(), "hitl_operator_gate_verified") == 0.0


def test_counts_from_separate_processes_add_up_in_one_scrape(monkeypatch, tmp_path):
    once = "from approvals.metrics import count_pause; count_pause('regular')"
    twice = once + "; count_pause('regular')"

    finish(run_in_process(once, tmp_path), run_in_process(twice, tmp_path))
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # the scrape reads their directory

    assert len(list(tmp_path.glob("counter_*.db"))) == 2  # really two processes, each with its own file
    assert value(scrape(), "hitl_pauses_total", surface="regular") == 3.0


def test_the_latest_gate_report_wins_across_processes_and_outlives_its_process(monkeypatch, tmp_path):
    report = "from approvals.metrics import set_operator_gate_verified as s; s({})"
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))

    finish(run_in_process(report.format(True), tmp_path))
    assert value(scrape(), "hitl_operator_gate_verified") == 1.0

    finish(run_in_process(report.format(False), tmp_path))
    assert value(scrape(), "hitl_operator_gate_verified") == 0.0

    finish(run_in_process(report.format(True), tmp_path))
    assert value(scrape(), "hitl_operator_gate_verified") == 1.0


def test_a_django_process_counts_into_the_shared_directory_not_into_its_memory(settings):
    # django-q2 imports prometheus_client during django.setup(): only a directory set by the
    # settings themselves is early enough for the web and worker processes to share their counts.
    # (tests/hitl_project/conftest.py then moves the exported directory to one of this session's own.)
    assert getattr(settings, "PROMETHEUS_MULTIPROC_DIR", None), "settings must set PROMETHEUS_MULTIPROC_DIR"

    metrics.count_pause("regular")

    assert list(Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).glob(f"counter_{os.getpid()}.db"))
