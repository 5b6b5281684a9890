"""Telling the surfaces above the core that a pause is settled: its continuation finished, or it was cancelled.

The core knows nothing of who listens (the Slack adapter queues the post of the verdict and the
continued output to the conversation's thread). A listener registers here in its AppConfig.ready() and
is called inside the settling transaction, by the process whose compare-and-set settled the pause, so
it hears of each pause once, and what it enqueues (django-q2's ORM broker, same database) commits with
the settlement or not at all: never announced for a rollback, never lost after a commit.

A listener therefore only writes rows (enqueues); it never calls out. Each runs in its own savepoint:
one that raises is logged and rolled back alone, and neither the settlement nor the other listeners
notice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.db import transaction

if TYPE_CHECKING:
    from approvals.models import Pause

logger = logging.getLogger(__name__)

SettlementListener = Callable[["Pause"], None]

_LISTENERS: list[SettlementListener] = []


def register_settlement_listener(listener: SettlementListener) -> None:
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


def announce_settled(pause: Pause) -> None:
    """Call every listener with ``pause``, each in a savepoint of the caller's transaction."""
    for listener in _LISTENERS:
        try:
            with transaction.atomic():
                listener(pause)
        except Exception:  # a listener's failure is its own: the settlement stands
            logger.exception("settlement listener %s failed for pause %s", listener, pause.id)
