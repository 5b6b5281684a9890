"""The old dotted path of the continuation task, kept for tasks queued before the rename.

django-q2 stores a task's function as a dotted path in its queue (and a schedule's in its row), so a
continuation enqueued as ``approvals.continuations.run_continuation`` by an earlier release must still
resolve. New code imports approvals.continuation_runs.
"""

from approvals.continuation_runs import run_continuation  # noqa: F401
