"""Telling the engines above the core that a pause is settled: its continuation finished, or it was cancelled.

The core knows nothing of who listens (the Slack adapter queues the post of the verdict and the
continued output to the conversation's thread). A listener registers here in its AppConfig.ready() and
is called inside the settling transaction, by the process whose compare-and-set settled the pause, so
it hears of each pause once, and what it enqueues (django-q2's ORM broker, same database) commits with
the settlement or not at all: never announced for a rollback, never lost after a commit.

A listener therefore only reads and writes rows (enqueues), as few as it can (it is on the hot path of
every decision); it never calls out. What it would read, it may register as a probe: the statement
that settles a continued turn's pause answers it with the turn's commit (``settlement_probes``), so the
Slack listener's question (is this conversation a Slack thread's?) costs no statement of its own there,
and one indexed SELECT where a pause settles otherwise. No savepoint is spent on a listener: one that
raises before touching the database is logged and the settlement stands; one whose statement fails
fails the settling transaction, which then changes nothing, like any other failed statement of it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from django.db import DatabaseError

if TYPE_CHECKING:
    from approvals.models import Pause

logger = logging.getLogger(__name__)

SettlementListener = Callable[..., None]

_LISTENERS: list[SettlementListener] = []
_PROBES: dict[SettlementListener, str] = {}


def register_settlement_listener(listener: SettlementListener, *, probe: str | None = None) -> None:
    """``probe``: what the listener would otherwise ask the database with a statement of its own, as an
    SQL boolean over the settled pause's row (its columns qualified by the pause table's name). A
    statement that settles the pause may answer it on the way (``settlement_probes``); the listener is
    then called with ``probed=`` that answer, and else with the pause alone."""
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)
    if probe is not None:
        _PROBES[listener] = probe


def settlement_probes() -> tuple[str, ...]:
    """The registered probes, in the order ``announce_settled`` takes their answers."""
    return tuple(_PROBES[listener] for listener in _LISTENERS if listener in _PROBES)


def announce_settled(pause: Pause, probed: Sequence[bool] | None = None) -> None:
    """Call every listener with ``pause``, in the caller's (settling) transaction; ``probed``: the answers
    to ``settlement_probes()`` that the settling statement gave, in their order (a listener whose probe
    got no answer asks for itself)."""
    probing = [listener for listener in _LISTENERS if listener in _PROBES]
    answered = (
        dict(zip(probing, probed, strict=True)) if probed is not None and len(probed) == len(probing) else {}
    )
    for listener in _LISTENERS:
        try:
            if listener in answered:
                listener(pause, probed=bool(answered[listener]))
            else:
                listener(pause)
        except DatabaseError:
            raise  # the transaction is broken: the settlement fails whole
        except Exception:  # a listener's own failure: the settlement stands
            logger.exception("settlement listener %s failed for pause %s", listener, pause.id)
