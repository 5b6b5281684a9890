"""The execution journal: an approved tool call runs at most once, even across crashes.

Claim ``(pause epoch, call id)`` before running (an insert that commits at once), record the capped
result after. A second attempt finds the claim: an EXECUTED entry replays its result, an EXECUTING one
(a crash inside the tool) is reported as outcome unknown and never run again.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from common.durations import positive_duration
from toolgate.models import JournalEntry, JournalStatus, JournalStepKind

RESULT_MAX_BYTES = 32_768


def cap_utf8(text: str, max_bytes: int) -> tuple[str, bool]:
    """At most ``max_bytes`` of UTF-8, never splitting a character; and whether it was cut."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False
    return data[:max_bytes].decode("utf-8", errors="ignore"), True


def claim(
    *,
    conversation_id: uuid.UUID,
    pause_epoch: uuid.UUID,
    call_id: str,
    tool_name: str,
    decided_by: str,
    step_kind: str = JournalStepKind.TOOL_CALL,
    method: str = "",
    path: str = "",
) -> bool:
    """True when this attempt may run the call; False when an earlier attempt claimed it."""
    try:
        with transaction.atomic():
            JournalEntry.objects.create(
                conversation_id=conversation_id,
                pause_epoch=pause_epoch,
                call_id=call_id,
                tool_name=tool_name,
                decided_by=decided_by,
                step_kind=step_kind,
                method=method,
                path=path,
                claimed_at=timezone.now(),
            )
    except IntegrityError:
        return False
    return True


def mark_executed(*, pause_epoch: uuid.UUID, call_id: str, result: str) -> None:
    capped, _ = cap_utf8(result, RESULT_MAX_BYTES)
    JournalEntry.objects.filter(pause_epoch=pause_epoch, call_id=call_id).update(
        status=JournalStatus.EXECUTED, result=capped, executed_at=timezone.now()
    )


def entry_for(*, pause_epoch: uuid.UUID, call_id: str) -> JournalEntry | None:
    return JournalEntry.objects.filter(pause_epoch=pause_epoch, call_id=call_id).first()


def outcome_unknown_call_ids(pause_epoch: uuid.UUID) -> list[str]:
    return list(
        JournalEntry.objects.filter(
            pause_epoch=pause_epoch, status=JournalStatus.EXECUTING, step_kind=JournalStepKind.TOOL_CALL
        )
        .order_by("claimed_at")
        .values_list("call_id", flat=True)
    )


def purge_expired() -> int:
    """Delete entries older than HITL_JOURNAL_RETENTION (P30D); run by a periodic schedule."""
    retention = (
        positive_duration(settings.HITL_JOURNAL_RETENTION)
        if settings.HITL_JOURNAL_RETENTION
        else timedelta(days=30)
    )
    deleted, _ = JournalEntry.objects.filter(claimed_at__lt=timezone.now() - retention).delete()
    return deleted
