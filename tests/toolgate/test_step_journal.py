"""The step journal's rule, through its service on real PostgreSQL: a recorded step replays its result and
its property writes without running; a claimed, unrecorded one answers outcome unknown without running;
a result too large for the journal keeps its status and property writes, not its body."""

from __future__ import annotations

import json

import pytest

from approvals.models import AuditEntry
from tests.approvals.test_admin_inbox import paused_pause
from toolgate.gate import journal
from toolgate.models import JournalEntry, JournalStatus
from toolgate.runtime.step_journal import Continuing, journaled, outcome_unknown_steps

pytestmark = pytest.mark.django_db

TASK = {"id": "notify", "type": "httpcalls"}
CALL = {
    "name": "call_notify",
    "request": {"method": "post", "path": "/notify?token=sk-live-abcdefghijklmnopqrstuvwx", "body": {"a": 1}},
}


def test_a_recorded_step_replays_its_result_and_property_writes_without_running(alice):
    continuing = Continuing.of(paused_pause(alice))
    written: list[tuple] = []

    def first_run(set_property):
        set_property("ticket", "T-1", "conversation")
        return {"status": 201, "body": {"id": 7}}

    assert journaled(continuing, TASK, CALL, set_property=lambda *a: written.append(a), run=first_run) == {
        "status": 201,
        "body": {"id": 7},
    }
    replayed: list[tuple] = []

    def never(set_property):
        raise AssertionError("a recorded step ran again")

    result = journaled(continuing, TASK, CALL, set_property=lambda *a: replayed.append(a), run=never)
    assert result == {"status": 201, "body": {"id": 7}}
    assert replayed == written == [("ticket", "T-1", "conversation")]


def test_a_claimed_unrecorded_step_is_outcome_unknown_without_running(alice):
    pause = paused_pause(alice)
    continuing = Continuing.of(pause)
    assert journal.claim(
        conversation_id=pause.subject_id,
        pause_epoch=pause.epoch,
        call_id="http:notify:call_notify",
        tool_name="call_notify",
        decided_by="approver",
        step_kind="HTTP_CALL",
        method="POST",
        path="/notify",
    )

    def never(set_property):
        raise AssertionError("a claimed step ran again")

    result = journaled(continuing, TASK, CALL, set_property=None, run=never)
    assert result["outcomeUnknown"] is True
    assert AuditEntry.objects.filter(pause_id=pause.pk, verb="hitl.step.outcome_unknown").count() == 1
    assert [step["step"] for step in outcome_unknown_steps(pause)] == ["call_notify"]


def test_a_step_shows_its_declared_target_redacted(alice):
    pause = paused_pause(alice)

    def interrupted(set_property):
        raise KeyboardInterrupt  # the process dies inside the call: the claim stays, nothing is recorded

    with pytest.raises(KeyboardInterrupt):
        journaled(Continuing.of(pause), TASK, CALL, set_property=None, run=interrupted)
    (step,) = outcome_unknown_steps(pause)
    assert step["method"] == "POST" and step["path"].startswith("/notify?token=")
    assert "sk-live" not in json.dumps(step) and set(step) == {"step", "method", "path", "claimedAt"}


def test_a_result_too_large_for_the_journal_keeps_its_status_not_its_body(alice):
    continuing = Continuing.of(paused_pause(alice))
    big = {"status": 200, "body": "x" * (journal.RESULT_MAX_BYTES + 10)}
    journaled(continuing, TASK, CALL, set_property=None, run=lambda set_property: big)
    entry = JournalEntry.objects.get(pause_epoch=continuing.pause_epoch)
    assert entry.status == JournalStatus.EXECUTED
    replayed = journaled(continuing, TASK, CALL, set_property=None, run=lambda set_property: {})
    assert replayed == {"status": 200, "bodyNotKept": True}
