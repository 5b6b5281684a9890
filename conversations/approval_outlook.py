"""What approving a rule pause runs, and the requester's latest inputs, for the reviewer's pages.

Read-only. The steps are read from the agent version the conversation runs on (a version is immutable):
the tasks after the one that paused, with the actions the paused step carries minus PAUSE_CONVERSATION
(conversations.turn_continuation._apply_decision removes it before the turn goes on). A label is allow-listed: a
task's type and id, an http call's name, method and path template, never its host, query, headers or
body, and the path is redacted with secret references blanked. What a rule met later adds is not known
before it runs, so a rules task after the pause is named as one that may add more.
"""

from __future__ import annotations

import re
from typing import Any

from django.db.models import OuterRef, Subquery

from approvals.models import Pause, PauseKind
from conversations.models import AgentVersion, ConversationStep
from conversations.pipeline.conversation_memory import PAUSE_CONVERSATION
from toolgate.outbound import redact_uri

SECRET_REFERENCE = re.compile(r"\$\{[^}]*\}")
# Task types that change nothing a reviewer weighs (templating fills placeholders of texts already listed).
SILENT_TASKS = {"templating"}


def _shown_path(path: Any) -> str:
    text = SECRET_REFERENCE.sub("${…}", str(path or "/"))
    return redact_uri(text.split("?", 1)[0])


def _http_labels(task: dict[str, Any], actions: list[str]) -> list[str]:
    labels = []
    for call in task.get("calls") or []:
        if not isinstance(call, dict) or not call.get("name"):
            continue
        if not any(action in actions for action in call.get("actions") or []):
            continue
        request = call.get("request") if isinstance(call.get("request"), dict) else {}
        method = str(request.get("method") or "GET").upper()
        labels.append(f"calls {call['name']} ({method} {_shown_path(request.get('path'))})")
    return labels


def _output_labels(task: dict[str, Any], actions: list[str]) -> list[str]:
    entries = [entry for entry in task.get("outputs") or [] if isinstance(entry, dict)]
    return [
        f"sends the reply written for {action}"
        for action in actions
        if any(e.get("action") == action for e in entries)
    ]


def task_labels(task: dict[str, Any], actions: list[str]) -> list[str]:
    """What one remaining task does with the step's actions, as phrases a reviewer reads after "the turn
    goes on: it …" (none: it does nothing seen)."""
    kind, task_id = str(task.get("type") or ""), str(task.get("id") or "?")
    if kind == "httpcalls":
        return _http_labels(task, actions)
    if kind == "output":
        return _output_labels(task, actions)
    if kind == "llm":
        return [f"asks the model (task {task_id})"]
    if kind == "behavior_rules":
        return [f"checks its rules again (task {task_id}; what they add runs too)"]
    if kind in SILENT_TASKS or not kind:
        return []
    return [f"runs its {kind} task {task_id}"]


def remaining_step_labels(
    document: dict[str, Any], *, workflow_id: Any, task_index: int, actions: list[str]
) -> list[str]:
    """The labels of the tasks after ``task_index`` of the workflow, in the order they run."""
    workflow = next(
        (w for w in document.get("workflows") or [] if isinstance(w, dict) and w.get("id") == workflow_id),
        None,
    )
    if workflow is None:
        return []
    acting = [str(action) for action in actions if action != PAUSE_CONVERSATION]
    labels: list[str] = []
    for task in (workflow.get("tasks") or [])[task_index + 1 :]:
        if isinstance(task, dict):
            labels.extend(task_labels(task, acting))
    return labels


def approve_steps(pause: Pause) -> list[str] | None:
    """The labels of what a RULE pause's approval runs (None: not a rule pause, or its version is gone)."""
    bookmark = pause.bookmark or {}
    if pause.kind != PauseKind.RULE or "taskIndex" not in bookmark or pause.agent_id is None:
        return None
    document = (
        AgentVersion.objects.filter(agent_id=pause.agent_id, version=pause.agent_version)
        .values_list("document", flat=True)
        .first()
    )
    if document is None:
        return None
    return remaining_step_labels(
        document,
        workflow_id=bookmark.get("workflowId"),
        task_index=int(bookmark["taskIndex"]),
        actions=list((pause.details or {}).get("actions") or []),
    )


def latest_inputs(conversation_ids: list[Any]) -> dict[Any, str]:
    """The latest live input of each conversation, in one query (a page of pauses, never one per row)."""
    if not conversation_ids:
        return {}
    latest = (
        ConversationStep.objects.filter(conversation_id=OuterRef("conversation_id"), undone=False)
        .order_by("-index")
        .values("index")[:1]
    )
    rows = ConversationStep.objects.filter(
        conversation_id__in=set(conversation_ids), undone=False, index=Subquery(latest)
    ).values_list("conversation_id", "input")
    return {conversation_id: text or "" for conversation_id, text in rows}
