"""Save-time validation of a whole agent document (on create, update and ZIP import).

Nothing is executed: the document is only read. Errors refuse the save (400 naming every offending
field path); warnings are returned beside a successful save for things that are legal but almost
certainly not what the designer meant (``Pause_Conversation`` never pauses).
"""

from __future__ import annotations

from django.conf import settings

from approvals.hitl_config import validate_hitl_config
from approvals.routing import routing_warnings
from conversations.agent_document_llm import check_llm_tool_references
from conversations.agent_document_tasks import TASK_CHECKS, TASK_KEYS
from conversations.document_fields import (
    IDENTIFIER,
    DocumentReport,
    check_secret_references,
    child,
    expect_choice,
    expect_list,
    expect_object,
    expect_string,
    expect_unique,
    is_request_header_value,
    readable_document,
    refuse_unknown_keys,
    warn_unknown_keys,
)
from conversations.pipeline.conversation_memory import PAUSE_CONVERSATION
from toolgate.gate import tool_approvals_warnings, validate_tool_approvals

NAME_MAX = 200
DOCUMENT_KEYS = ("name", "description", "workflows", "hitlConfig")
WORKFLOW_KEYS = ("id", "name", "description", "tasks")
TASK_COMMON_KEYS = ("id", "type", "description")
TASK_TYPES = tuple(TASK_CHECKS)
RULE_PAUSE_SETTINGS = ("timeoutPolicy", "approvalTimeout", "pauseReason", "allowSelfApproval")


def validate_agent_document(doc: object) -> DocumentReport:
    """Every error and warning of ``doc``, each under its full field path (``workflows[0].tasks[1].…``)."""
    report = DocumentReport()
    doc = readable_document(report, doc, "agent")
    if doc is None:
        return report
    refuse_unknown_keys(report, doc, "", DOCUMENT_KEYS, "top-level")
    expect_string(report, doc.get("name"), "name", non_empty=True, max_length=NAME_MAX)
    expect_string(report, doc.get("description"), "description", required=False)
    workflows = expect_list(report, doc.get("workflows"), "workflows", non_empty=True)
    seen_ids: dict[str, str] = {}
    for index, workflow in enumerate(workflows or []):
        _check_workflow(report, workflow, child("workflows", index), seen_ids)
    hitl_config = doc.get("hitlConfig")
    report.errors.extend(validate_hitl_config(hitl_config, "hitlConfig"))
    report.warnings.extend(routing_warnings(hitl_config, "hitlConfig"))
    if isinstance(hitl_config, dict) and isinstance(hitl_config.get("toolApprovals"), dict):
        report.errors.extend(
            validate_tool_approvals(hitl_config["toolApprovals"], "hitlConfig.toolApprovals")
        )
    report.warnings.extend(
        tool_approvals_warnings(hitl_config, _llm_tool_approvals(doc), mode=settings.HITL_TASK_APPROVALS_MODE)
    )
    check_llm_tool_references(report, doc)
    _warn_untriggerable_hitl_config(report, doc)
    return report


def _check_workflow(report: DocumentReport, value: object, path: str, seen_ids: dict[str, str]) -> None:
    workflow = expect_object(report, value, path)
    if workflow is None:
        return
    warn_unknown_keys(report, workflow, path, WORKFLOW_KEYS, "workflow")
    _expect_unique_id(report, workflow.get("id"), child(path, "id"), seen_ids, "workflow", pattern=True)
    tasks = expect_list(report, workflow.get("tasks"), child(path, "tasks"))
    task_ids: dict[str, str] = {}
    for index, task in enumerate(tasks or []):
        _check_task(report, task, child(child(path, "tasks"), index), task_ids)


def _check_task(report: DocumentReport, value: object, path: str, seen_ids: dict[str, str]) -> None:
    task = expect_object(report, value, path)
    if task is None:
        return
    _expect_unique_id(report, task.get("id"), child(path, "id"), seen_ids, "task", pattern=False)
    task_type = expect_choice(report, task.get("type"), child(path, "type"), TASK_TYPES)
    check_secret_references(
        report,
        task,
        path,
        header_value=is_request_header_value if task_type == "httpcalls" else lambda keys: False,
    )
    if task_type is None:
        return
    warn_unknown_keys(report, task, path, TASK_COMMON_KEYS + TASK_KEYS[task_type], f"{task_type} task")
    TASK_CHECKS[task_type](report, task, path)


def _expect_unique_id(
    report: DocumentReport, value: object, path: str, seen: dict[str, str], what: str, *, pattern: bool
) -> None:
    identifier = expect_string(report, value, path, non_empty=True, pattern=IDENTIFIER if pattern else None)
    expect_unique(report, identifier, path, seen, f"{what} id")


def _warn_untriggerable_hitl_config(report: DocumentReport, doc: dict) -> None:
    """hitlConfig's timeout and reason only shape a pause; they never cause one. Without a behavior rule
    emitting PAUSE_CONVERSATION and without toolApprovals, nothing in the agent can pause."""
    config = doc.get("hitlConfig")
    if not isinstance(config, dict):
        return
    settings = [key for key in RULE_PAUSE_SETTINGS if config.get(key) is not None]
    if not settings or _has_tool_approvals(doc) or _emits_pause(doc):
        return
    report.warn(
        "hitlConfig",
        f"hitlConfig sets {', '.join(settings)} but nothing can trigger a pause: no behavior rule emits "
        f"{PAUSE_CONVERSATION} and no toolApprovals is configured",
    )


def _tasks(doc: dict) -> list[dict]:
    workflows = doc.get("workflows")
    tasks: list[dict] = []
    for workflow in workflows if isinstance(workflows, list) else []:
        workflow_tasks = workflow.get("tasks") if isinstance(workflow, dict) else None
        if isinstance(workflow_tasks, list):
            tasks.extend(task for task in workflow_tasks if isinstance(task, dict))
    return tasks


def _llm_tool_approvals(doc: dict) -> dict[str, object]:
    """Each llm task's toolApprovals block by its path (``workflows[0].tasks[2].toolApprovals``)."""
    blocks: dict[str, object] = {}
    workflows = doc.get("workflows")
    for w_index, workflow in enumerate(workflows if isinstance(workflows, list) else []):
        tasks = workflow.get("tasks") if isinstance(workflow, dict) else None
        for t_index, task in enumerate(tasks if isinstance(tasks, list) else []):
            if isinstance(task, dict) and task.get("type") == "llm" and task.get("toolApprovals") is not None:
                blocks[f"workflows[{w_index}].tasks[{t_index}].toolApprovals"] = task["toolApprovals"]
    return blocks


def _emits_pause(doc: dict) -> bool:
    for task in _tasks(doc):
        rules = task.get("rules") if task.get("type") == "behavior_rules" else None
        for rule in rules if isinstance(rules, list) else []:
            actions = rule.get("actions") if isinstance(rule, dict) else None
            if isinstance(actions, list) and PAUSE_CONVERSATION in actions:
                return True
    return False


def _has_tool_approvals(doc: dict) -> bool:
    """A non-empty toolApprovals object at agent level or on any llm task."""
    config = doc.get("hitlConfig")
    candidates = [config.get("toolApprovals") if isinstance(config, dict) else None]
    candidates += [task.get("toolApprovals") for task in _tasks(doc) if task.get("type") == "llm"]
    return any(isinstance(candidate, dict) and candidate for candidate in candidates)
