"""The built-in lifecycle task types and their runners."""

from __future__ import annotations

from conversations.pipeline import (
    behavior_rules,
    httpcalls_task,
    llm_task,
    output_task,
    parser,
    properties_task,
    templating,
)
from conversations.pipeline.registry import TaskRunner, register_task_type

BUILTIN_TASKS: dict[str, TaskRunner] = {
    "parser": parser.run,
    "behavior_rules": behavior_rules.run,
    "properties": properties_task.run,
    "output": output_task.run,
    "templating": templating.run,
    "httpcalls": httpcalls_task.run,
    "llm": llm_task.run,
}


def register_builtin_tasks() -> None:
    """Register every built-in task type (safe to call more than once)."""
    for task_type, runner in BUILTIN_TASKS.items():
        register_task_type(task_type, runner)
