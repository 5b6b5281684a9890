"""The per-user turn rate across web processes: two live uvicorn processes on the test database, one
user's starts sent to each in turn. The counts live in the database cache both processes share
(``HITL_THROTTLE_CACHE_URL``'s default), so the rate holds for the user as a whole, not per process."""

from __future__ import annotations

import pytest
from django.core.cache import caches

from common.throttles import THROTTLE_CACHE
from conversations.models import Conversation
from harnesses.factories import deployed_agent
from harnesses.live_stack import api_user, running_stack

pytestmark = pytest.mark.django_db(transaction=True)

RATE = 3


def test_two_web_processes_count_one_users_turns_together(django_db_blocker, tmp_path):
    stacks = [
        running_stack(
            django_db_blocker, tmp_path / f"web{i}", qclusters=False, HITL_THROTTLE_TURNS_RATE=f"{RATE}/min"
        )
        for i in range(2)
    ]
    try:
        for i in range(2):
            (tmp_path / f"web{i}").mkdir()
        servers = [next(stack) for stack in stacks]
        assert servers[0].server.popen.pid != servers[1].server.popen.pid
        token, agent_id = api_user("alice"), deployed_agent()
        clients = [server.client(token) for server in servers]

        answers = []
        for attempt in range(2 * RATE):  # A, B, A, B, ...: each process alone would allow RATE
            response = clients[attempt % 2].post(f"/agents/{agent_id}/start")
            answers.append(response.status_code)
            if response.status_code == 429:
                assert response.headers["content-type"].startswith("application/problem+json")
                assert int(response.headers["retry-after"]) >= 1
                assert response.json()["code"] == "THROTTLED"

        assert answers == [201] * RATE + [429] * RATE, answers
        assert Conversation.objects.count() == RATE
        for client in clients:
            client.close()
    finally:
        for stack in stacks:
            stack.close()
        caches[THROTTLE_CACHE].clear()  # the counts are committed rows of a table no flush empties
