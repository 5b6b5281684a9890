"""The continuation task run by django-q2 workers after a decision.

Delivery is at-least-once, so the body is an idempotent claim: a pause is continued only while it is
RESOLVING and nobody holds a live lease on it.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from approvals.decisions import restore_pause
from approvals.models import Pause, PauseStatus
from approvals.surfaces import ContinuationNotStarted, handler_for

logger = logging.getLogger(__name__)


def claim_continuation(pause_id: str) -> Pause | None:
    now = timezone.now()
    lease = now + timedelta(seconds=settings.HITL_CONTINUATION_LEASE_SECONDS)
    claimed = (
        Pause.objects.filter(pk=pause_id, status=PauseStatus.RESOLVING)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .update(lease_until=lease)
    )
    if not claimed:
        return None
    return Pause.objects.select_related("owner", "decided_by_user").get(pk=pause_id)


def run_continuation(pause_id: str) -> str:
    pause = claim_continuation(pause_id)
    if pause is None:
        return "skipped"
    try:
        handler_for(pause.surface).continue_pause(pause)
    except ContinuationNotStarted as exc:
        logger.warning("continuation of pause %s could not start: %s", pause_id, exc)
        restore_pause(pause_id=pause.id, reason=str(exc))
        return "restored"
    return "continued"
