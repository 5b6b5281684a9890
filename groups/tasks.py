"""The task list of a discussion's EXECUTE phases: statuses, readiness and the no-progress fingerprint.

Task statuses: PENDING (declared or planned), ASSIGNED (a rejected result sent back with the reviewer's
note), IN_PROGRESS, AWAITING_APPROVAL (a result submitted to a TASK gate), COMPLETED and FAILED.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

PENDING, ASSIGNED, IN_PROGRESS = "PENDING", "ASSIGNED", "IN_PROGRESS"
AWAITING_APPROVAL, COMPLETED, FAILED = "AWAITING_APPROVAL", "COMPLETED", "FAILED"
STATUSES = [PENDING, ASSIGNED, IN_PROGRESS, AWAITING_APPROVAL, COMPLETED, FAILED]
TERMINAL = (COMPLETED, FAILED)


def of_phase(tasks: Iterable[dict[str, Any]], phase_name: str) -> list[dict[str, Any]]:
    return [task for task in tasks if task["phase"] == phase_name]


def ready(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tasks that may run now: PENDING or ASSIGNED, every dependency COMPLETED."""
    by_id = {task["id"]: task for task in tasks}
    return [
        task
        for task in tasks
        if task["status"] in (PENDING, ASSIGNED)
        and all(by_id[d]["status"] == COMPLETED for d in task["dependsOn"] if d in by_id)
    ]


def awaiting(tasks: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [task for task in tasks if task["status"] == AWAITING_APPROVAL]


def fail_dependents_of_failed(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A task that depends on a FAILED task fails without running (and so do the tasks depending on it);
    returns the tasks failed here."""
    by_id = {task["id"]: task for task in tasks}
    failed_here: list[dict[str, Any]] = []
    changed = True
    while changed:
        changed = False
        for task in tasks:
            failed = [d for d in task["dependsOn"] if d in by_id and by_id[d]["status"] == FAILED]
            if task["status"] in (PENDING, ASSIGNED) and failed:
                task["status"], task["note"] = FAILED, f"not run: it depends on failed task {failed[0]}"
                failed_here.append(task)
                changed = True
    return failed_here


def fingerprint(*, phase_index: int, tasks: Iterable[dict[str, Any]], turn_count: int) -> str:
    """What a TASK pause leaves undone (as EDDI computes it: ``phase=<i>;`` and the sorted
    ``id:STATUS,`` of every task not COMPLETED or FAILED), plus the turn count. Two pauses with the same
    fingerprint mean the approval cycle between them ran no member turn and advanced no task: no
    progress. (EDDI leaves the turn count out, so a rejected task sent back with RETRY, which
    ran again and is awaiting approval again, looked like no progress and failed the discussion.)"""
    undone = sorted(f"{task['id']}:{task['status']}," for task in tasks if task["status"] not in TERMINAL)
    return f"phase={phase_index};{''.join(undone)}turns={turn_count}"
