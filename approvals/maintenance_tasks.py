"""Harmless maintenance jobs that staff may put on a schedule (the default HITL_SCHEDULABLE_FUNCTIONS).

The schedule store runs only functions on that allow-list: a free dotted path would be remote code
execution for anyone allowed to schedule.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def noop(*args: Any, **kwargs: Any) -> str:
    """Does nothing; a heartbeat to check that the q-cluster runs schedules."""
    logger.info("noop schedule ran")
    return "ok"


def clear_expired_sessions() -> None:
    """Delete expired Django sessions (what ``manage.py clearsessions`` does)."""
    from importlib import import_module

    from django.conf import settings

    engine = import_module(settings.SESSION_ENGINE)
    engine.SessionStore.clear_expired()
