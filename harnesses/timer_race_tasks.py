"""The fire task the timer-race harness enqueues on the timer queue (tests/e2e/test_live_timer_races.py).

It is the product's ``approvals.timers.fire_timeout``, unchanged, and also says which process ran it, so
the harness can show that both q-clusters took duplicates. Imported by the q-cluster workers (their
working directory is the project root).
"""

from __future__ import annotations

import os

from approvals.timers import fire_timeout


def fire_and_report(pause_id: str) -> dict[str, object]:
    return {"pid": os.getpid(), "result": fire_timeout(pause_id)}
