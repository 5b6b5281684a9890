"""Run what the services enqueued on django-q2's ORM broker, as a worker would.

Tasks are read back from the real broker table (``django_q_ormq``) and executed by their dotted path,
so tests exercise the real enqueue (inside the decision's transaction) without a q-cluster in-process.
The broker's visibility lock is ignored: under time travel a task is "enqueued in the future".
"""

from __future__ import annotations

from pydoc import locate

from django_q.models import OrmQ
from django_q.signing import SignedPackage

# A q-cluster's own loop, not a piece of work: the timer drainer polls for its run time and then hands
# over to a fresh drainer, so running it here would never end. Run only when ``only`` names it.
CLUSTER_LOOPS = frozenset({"approvals.timers.drain_due_timers"})


def run_queued_tasks(max_tasks: int = 1000, only: str | None = None) -> int:
    """Run queued tasks in order until the queue is empty (tasks may enqueue more); returns how many.
    The timer drainer (``CLUSTER_LOOPS``) is left queued unless ``only`` names it."""
    ran = 0
    while ran < max_tasks:
        queued = OrmQ.objects.order_by("id")
        row = None
        for candidate in queued:
            task = SignedPackage.loads(candidate.payload)
            wanted = task["func"] == only if only is not None else task["func"] not in CLUSTER_LOOPS
            if wanted:
                row = candidate
                break
        if row is None:
            break
        row.delete()
        func = task["func"]
        if isinstance(func, str):
            func = locate(func)
        func(*task.get("args", ()), **task.get("kwargs", {}))
        ran += 1
    return ran


def queued_functions() -> list[str]:
    return [SignedPackage.loads(row.payload)["func"] for row in OrmQ.objects.order_by("id")]


def queued_count() -> int:
    return OrmQ.objects.count()
