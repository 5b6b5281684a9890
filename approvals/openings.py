"""Telling the engines above the core that a pause was opened (the sibling of approvals.settlements).

A listener registers in its AppConfig.ready() and is called inside the transaction that opens the
pause (open_pause requires one), so what it enqueues commits with the pause or not at all: a pause is
announced exactly once, whichever process, request or timer opened it. The Slack adapter records the
thread notice and queues the approval card of a group pause whose discussion a Slack thread started.

A listener only reads and writes rows, as few as it can, and never calls out; one that does nothing for
a pause's engine must return before its first statement (a 1:1 turn pays nothing for a group notice).
Failures are handled as in approvals.settlements: a database error fails the opening transaction,
anything else is logged and the pause stands.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.db import DatabaseError

if TYPE_CHECKING:
    from approvals.models import Pause

logger = logging.getLogger(__name__)

OpeningListener = Callable[["Pause"], None]

_LISTENERS: list[OpeningListener] = []


def register_opening_listener(listener: OpeningListener) -> None:
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


def announce_opened(pause: Pause) -> None:
    """Call every listener with the just-inserted ``pause``, in the opening transaction."""
    for listener in _LISTENERS:
        try:
            listener(pause)
        except DatabaseError:
            raise
        except Exception:
            logger.exception("opening listener %s failed for pause %s", listener, pause.id)
