"""Which turns run in one transaction.

A turn whose every task is local (parser, behaviour rules, properties, output, templating: no call
leaves the process, nothing waits) runs start to commit inside one transaction: it holds the
conversation (its row locked until the commit, read with its window in one statement, nothing written),
runs and writes its result and its step in one statement. A conversation's first turn writes nothing
before its commit, which inserts the row and the step in one statement (a transaction of its own only
when the turn opened a pause).
Nobody ever sees it IN_PROGRESS, so it needs no lease and no heartbeat, and a process that dies part
way leaves nothing behind: the transaction rolls back and the conversation is as it was. A second
say meanwhile waits on the row lock for the few milliseconds the turn takes, then runs after it.

A document with any other task (``llm``, ``httpcalls``, a registered task type) may be slow, so its
turns commit the claim first and run under a lease, as ``conversations.turns`` describes. Unknown
task types count as not local (fail closed).
"""

from __future__ import annotations

from typing import Any

LOCAL_TASK_TYPES = frozenset({"parser", "behavior_rules", "properties", "output", "templating"})


def runs_in_one_transaction(document: dict[str, Any]) -> bool:
    """Whether every task of every workflow of the agent document is local."""
    workflows = document.get("workflows")
    if not isinstance(workflows, list):
        return False
    for workflow in workflows:
        tasks = workflow.get("tasks") if isinstance(workflow, dict) else None
        if not isinstance(tasks, list):
            return False
        for task in tasks:
            if not isinstance(task, dict) or task.get("type") not in LOCAL_TASK_TYPES:
                return False
    return True
