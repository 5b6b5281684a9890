"""Exactly one decision per pause (docs/reliability.md, R1) over HTTP: the racers of harnesses/decision_race.py against two
live uvicorn processes on the test database, spread over both, so every round is decided across
processes. Full size only (``bench/decision_races.py --http``): it starts two servers."""

from __future__ import annotations

import os

import pytest

from harnesses.decision_race import OverHttp, World, run_rounds, tool_server
from harnesses.live_stack import running_stack
from tests.slack_surface.conftest import FakeSlack

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.fullsize]


def test_exactly_one_decision_per_pause_over_http_with_two_web_processes(
    django_db_blocker, tmp_path, settings
):
    slack = FakeSlack()
    slack.thread.start()
    settings.HITL_SLACK_API_URL = slack.url  # the timer racer runs here; the servers get it below
    tools = tool_server()
    stacks = [
        running_stack(django_db_blocker, tmp_path / f"web{i}", qclusters=False, HITL_SLACK_API_URL=slack.url)
        for i in range(2)
    ]
    transport = None
    try:
        for i, _ in enumerate(stacks):
            (tmp_path / f"web{i}").mkdir()
        servers = [next(stack) for stack in stacks]
        world = World.build(tool_server_url=tools.url, slack=slack)
        world.transport = transport = OverHttp(world, [server.base_url for server in servers])

        rounds = int(os.environ.get("DECISION_RACE_HTTP_ROUNDS", "100"))
        summary = run_rounds(world, rounds)

        print(summary.report())
        assert summary.histogram == {1: rounds}, summary.report()
        assert summary.bad_rounds == [], summary.report()
    finally:
        if transport is not None:
            transport.close()
        for stack in stacks:
            stack.close()
        tools.server.shutdown()
        tools.server.server_close()
        slack.server.shutdown()
        slack.server.server_close()
