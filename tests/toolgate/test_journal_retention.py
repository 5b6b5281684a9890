"""Journal entries are kept HITL_JOURNAL_RETENTION (P30D by default), then purged by a daily schedule."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone
from django_q.models import Schedule

from toolgate.gate.journal import purge_expired
from toolgate.models import JournalEntry

pytestmark = pytest.mark.django_db


def _entry(claimed_at):
    return JournalEntry.objects.create(
        conversation_id=uuid.uuid4(),
        pause_epoch=uuid.uuid4(),
        call_id="c",
        tool_name="t",
        status="EXECUTED",
        claimed_at=claimed_at,
    )


def test_entries_older_than_the_retention_are_purged_younger_ones_kept(settings):
    settings.HITL_JOURNAL_RETENTION = "P30D"
    now = timezone.now()
    old, young = _entry(now - timedelta(days=31)), _entry(now - timedelta(days=29))
    with time_machine.travel(now, tick=False):
        assert purge_expired() == 1
    assert list(JournalEntry.objects.values_list("pk", flat=True)) == [young.pk]
    assert not JournalEntry.objects.filter(pk=old.pk).exists()


def test_the_purge_runs_on_a_daily_schedule():
    schedule = Schedule.objects.get(name="hitl-journal-retention")
    assert (schedule.func, schedule.schedule_type) == ("toolgate.gate.journal.purge_expired", Schedule.DAILY)
