"""Exactly one decision per pause, all surfaces at once (docs/reliability.md, R1): the harness of harnesses/decision_race.py
on real PostgreSQL with eight real threads per round. Fast size here; the full size is
``bench/decision_races.py`` (the ``fullsize`` test below, and over HTTP with two web processes). Every
fifth round of the mixed run is an approval request; the approval requests' own run races its eight
(REST decisions, the service account's withdrawal, the admin page, the timer, MCP's decision and the
person's withdrawal, a Slack click) on approval requests only."""

from __future__ import annotations

import os

import pytest

from harnesses.decision_race import KINDS, REQUEST_SURFACES, Summary, World, run_rounds, tool_server
from tests.slack_surface.conftest import FakeSlack

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]

FAST_ROUNDS = int(os.environ.get("DECISION_RACE_FAST_ROUNDS", "100"))
REQUEST_ROUNDS = int(os.environ.get("DECISION_RACE_REQUEST_ROUNDS", "40"))


@pytest.fixture
def world(settings):
    slack = FakeSlack()
    slack.thread.start()
    settings.HITL_SLACK_API_URL = slack.url
    tools = tool_server()
    try:
        yield World.build(tool_server_url=tools.url, slack=slack)
    finally:
        tools.server.shutdown()
        tools.server.server_close()
        slack.server.shutdown()
        slack.server.server_close()


def _exactly_one_decision_per_pause(world: World, rounds: int, kinds: tuple[str, ...] = KINDS) -> Summary:
    summary = run_rounds(world, rounds, kinds)
    print(summary.report())
    assert len(summary.rounds) == rounds
    assert summary.histogram == {1: rounds}, summary.report()
    assert summary.bad_rounds == [], summary.report()
    return summary


def test_exactly_one_decision_per_pause_with_eight_surfaces_racing(world):
    _exactly_one_decision_per_pause(world, FAST_ROUNDS)


def test_exactly_one_decision_per_approval_request_with_decisions_cancels_and_the_timer_racing(world):
    summary = _exactly_one_decision_per_pause(world, REQUEST_ROUNDS, ("REQUEST",))

    won = set(summary.wins_by_surface)
    # the three kinds of race each happened: a decision, a cancel and the timeout won some rounds
    assert won & {name for name in REQUEST_SURFACES if "decision" in name or "decide" in name}, won
    assert won & {name for name in REQUEST_SURFACES if "cancel" in name}, won
    assert "timer fire" in won, won


@pytest.mark.fullsize
def test_exactly_one_decision_per_pause_with_eight_surfaces_racing_full_size(world):
    _exactly_one_decision_per_pause(world, int(os.environ.get("DECISION_RACE_ROUNDS", "500")))
