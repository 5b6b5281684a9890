"""Run what the decision services enqueued on django-q2's ORM broker, as a worker would.

The task is read back from the real broker table and executed by its dotted path, so tests exercise
the real enqueue (in the decision's transaction) without running a q-cluster in-process.
"""

from __future__ import annotations

from pydoc import locate

from django_q.brokers import get_broker
from django_q.models import OrmQ
from django_q.signing import SignedPackage


def run_queued_tasks(max_rounds: int = 20) -> int:
    broker = get_broker()
    ran = 0
    for _ in range(max_rounds):
        items = broker.dequeue()
        if not items:
            break
        for task_id, payload in items:
            task = SignedPackage.loads(payload)
            func = task["func"]
            if isinstance(func, str):
                func = locate(func)
            func(*task.get("args", ()), **task.get("kwargs", {}))
            broker.acknowledge(task_id)
            ran += 1
    return ran


def queued_count() -> int:
    return OrmQ.objects.count()
