"""The HITL counters move exactly when EDDI's do, driven through the real services."""

from __future__ import annotations

import pytest
import time_machine

from approvals.models import Pause
from approvals.timers import fire_due_batch, fire_timeout
from harnesses.factories import account_bot, deployed_agent, paused_conversation
from tests.hitl_project.scrape import moved, scrape

pytestmark = pytest.mark.django_db(transaction=True)  # counts are recorded on commit


def _pause(client, policy="AUTO_REJECT") -> Pause:
    agent = deployed_agent(account_bot(hitlConfig={"timeoutPolicy": policy, "approvalTimeout": "PT1M"}))
    return Pause.objects.get(subject_id=paused_conversation(client, agent))


def test_a_rule_pause_counts_one_pause_and_a_decision_one_resume(alice_client, approver_client):
    before = scrape()
    pause = _pause(alice_client)
    after_pause = scrape()
    assert moved(before, after_pause, "hitl_") == {
        ("hitl_pauses_total", frozenset({("surface", "regular")})): 1.0
    }
    approver_client.post(f"/agents/{pause.subject_id}/resume", {"verdict": "APPROVED"}, format="json")
    assert moved(after_pause, scrape(), "hitl_") == {
        ("hitl_resumes_total", frozenset({("surface", "regular")})): 1.0
    }


def test_a_bad_decision_counts_nothing(alice_client, approver_client):
    pause = _pause(alice_client)
    before = scrape()
    approver_client.post(f"/agents/{pause.subject_id}/resume", {"verdict": "MAYBE"}, format="json")
    assert moved(before, scrape(), "hitl_") == {}


def test_a_timeout_counts_even_when_its_fire_is_a_no_op(alice_client, approver_client):
    pause = _pause(alice_client)
    before = scrape()
    with time_machine.travel(pause.due_at, tick=False):
        assert fire_due_batch() == 1
    approver_client.post(f"/agents/{pause.subject_id}/resume", {"verdict": "APPROVED"}, format="json")
    assert fire_timeout(str(pause.id)) == "no-op"  # a late, duplicate fire
    counts = moved(before, scrape(), "hitl_")
    assert counts[("hitl_timeouts_total", frozenset({("surface", "regular")}))] == 2.0
    assert counts[("hitl_resumes_total", frozenset({("surface", "regular")}))] == 1.0  # the timer's decision
