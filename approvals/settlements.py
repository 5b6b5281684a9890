"""Telling the engines above the core that a pause is settled: its continuation finished, or it was cancelled.

The core knows nothing of who listens (the Slack adapter queues the post of the verdict and the
continued output to the conversation's thread). A listener registers here in its AppConfig.ready() and
is called inside the settling transaction, by the process whose compare-and-set settled the pause, so
it hears of each pause once, and what it enqueues (django-q2's ORM broker, same database) commits with
the settlement or not at all: never announced for a rollback, never lost after a commit.

A listener therefore only reads and writes rows (enqueues), as few as it can (it is on the hot path of
every decision: the Slack listener costs one indexed SELECT for a conversation that is not a Slack
thread's); it never calls out. No savepoint is spent on it: a listener that raises before touching the
database is logged and the settlement stands; one whose statement fails fails the settling transaction,
which then changes nothing, like any other failed statement of it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.db import DatabaseError

if TYPE_CHECKING:
    from approvals.models import Pause

logger = logging.getLogger(__name__)

SettlementListener = Callable[["Pause"], None]

_LISTENERS: list[SettlementListener] = []


def register_settlement_listener(listener: SettlementListener) -> None:
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


def announce_settled(pause: Pause) -> None:
    """Call every listener with ``pause``, in the caller's (settling) transaction."""
    for listener in _LISTENERS:
        try:
            listener(pause)
        except DatabaseError:
            raise  # the transaction is broken: the settlement fails whole
        except Exception:  # a listener's own failure: the settlement stands
            logger.exception("settlement listener %s failed for pause %s", listener, pause.id)
