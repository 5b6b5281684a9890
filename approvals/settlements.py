"""Telling the surfaces above the core that a pause is settled: its continuation finished, or it was cancelled.

The core knows nothing of who listens (the Slack adapter posts the verdict and the continued output to
the conversation's thread). A listener registers here in its AppConfig.ready() and is called once the
settling transaction committed, never for one that rolled back, and only by the process whose
compare-and-set settled the pause, so it hears of each pause once. A listener must be quick (it runs
in the deciding request or worker): it enqueues its own work, it does not call out. A listener that
raises is logged and does not disturb the others or the caller (``on_commit(robust=True)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.db import transaction

if TYPE_CHECKING:
    from approvals.models import Pause

SettlementListener = Callable[["Pause"], None]

_LISTENERS: list[SettlementListener] = []


def register_settlement_listener(listener: SettlementListener) -> None:
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


def announce_settled(pause: Pause) -> None:
    """Call every listener with ``pause`` once the caller's transaction commits (at once outside one)."""
    for listener in _LISTENERS:
        transaction.on_commit(lambda listener=listener: listener(pause), robust=True)
