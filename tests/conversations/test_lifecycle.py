"""The lifecycle runner: where a turn pauses, stops, and where a continuation picks up."""

from __future__ import annotations

import pytest

from conversations.lifecycle import Completed, Paused, Stopped, config_drift, run_lifecycle
from conversations.pipeline.builtin_tasks import register_builtin_tasks
from conversations.pipeline.conversation_memory import ConversationMemory, Step
from conversations.pipeline.pausing import PauseRequest, ResumePoint
from conversations.pipeline.registry import TurnContext, register_task_type
from toolgate.models import PendingToolBatch


def _memory(actions: list[str] | None = None) -> ConversationMemory:
    return ConversationMemory(conversation_id="c", current=Step(input="x", actions=list(actions or [])))


def _rules(*actions: str) -> dict:
    return {
        "id": f"r-{'-'.join(actions)}",
        "type": "behavior_rules",
        "rules": [{"name": "always", "actions": list(actions), "conditions": []}],
    }


def _document(*workflows: list[dict]) -> dict:
    return {"name": "t", "workflows": [{"id": f"w{i}", "tasks": tasks} for i, tasks in enumerate(workflows)]}


def _point(
    workflow_id: str, task_index: int, kind: str = "RULE", llm_task_id: str | None = None
) -> ResumePoint:
    batch = PendingToolBatch(llm_task_id=llm_task_id) if llm_task_id is not None else None
    return ResumePoint(
        workflow_id=workflow_id, task_index=task_index, pause_id="p", kind=kind, tool_batch=batch
    )


@pytest.fixture(autouse=True)
def _tasks() -> None:
    register_builtin_tasks()


def test_a_task_that_adds_pause_conversation_pauses_after_itself() -> None:
    document = _document([_rules("a"), _rules("PAUSE_CONVERSATION"), _rules("b")])
    memory = _memory()
    outcome = run_lifecycle(document, memory, TurnContext(agent_document=document, conversation_id="c"))
    assert isinstance(outcome, Paused)
    assert (outcome.workflow_id, outcome.task_index, outcome.request.kind) == ("w0", 1, "RULE")
    assert "b" not in memory.current.actions


def test_a_stale_pause_conversation_never_re_pauses() -> None:
    document = _document([_rules("a"), _rules("PAUSE_CONVERSATION")])
    memory = _memory(["PAUSE_CONVERSATION"])  # already there before any task ran
    outcome = run_lifecycle(document, memory, TurnContext(agent_document=document, conversation_id="c"))
    assert outcome == Completed()


def test_stop_conversation_beats_pause_in_the_same_step() -> None:
    document = _document([_rules("PAUSE_CONVERSATION", "STOP_CONVERSATION")])
    outcome = run_lifecycle(document, _memory(), TurnContext(agent_document=document, conversation_id="c"))
    assert outcome == Stopped()


def test_resume_runs_the_rest_of_the_paused_workflow_and_every_later_workflow() -> None:
    document = _document([_rules("a"), _rules("b"), _rules("c")], [_rules("d")])
    memory = _memory()
    outcome = run_lifecycle(
        document, memory, TurnContext(agent_document=document, conversation_id="c"), resume=_point("w0", 2)
    )
    assert outcome == Completed()
    assert memory.current.actions == ["c", "d"]


def test_resuming_at_the_end_of_a_workflow_runs_nothing_of_it() -> None:
    document = _document([_rules("a")], [_rules("d")])
    memory = _memory()
    run_lifecycle(
        document, memory, TurnContext(agent_document=document, conversation_id="c"), resume=_point("w0", 1)
    )
    assert memory.current.actions == ["d"]


def test_a_missing_paused_workflow_is_config_drift() -> None:
    document = _document([_rules("a")])
    for kind, llm_task_id in (("RULE", None), ("TOOL_CALL", "assistant")):
        drift = config_drift(document, _point("gone", 0, kind, llm_task_id))
        assert drift is not None and drift.workflow_gone
        assert drift.reason == "Paused workflow 'gone' no longer exists (config drift)"


def test_config_drift_of_a_tool_pause_when_the_paused_llm_task_is_not_at_its_index() -> None:
    llm = {"id": "assistant", "type": "llm"}
    assert config_drift(_document([_rules("a"), llm]), _point("w0", 1, "TOOL_CALL", "assistant")) is None
    drifted = [
        (_document([_rules("a"), {**llm, "id": "assistant-v2"}]), _point("w0", 1, "TOOL_CALL", "assistant")),
        (_document([_rules("a"), {**llm, "type": "output"}]), _point("w0", 1, "TOOL_CALL", "assistant")),
        (_document([llm]), _point("w0", 1, "TOOL_CALL", "assistant")),  # the task moved up
        (_document([_rules("a"), llm]), _point("w0", 1, "TOOL_CALL")),  # the batch is gone
    ]
    for document, point in drifted:
        drift = config_drift(document, point)
        assert drift is not None and not drift.workflow_gone
        assert "is no longer at its place in the workflow" in drift.reason


def test_a_rule_pause_only_drifts_when_its_workflow_is_gone() -> None:
    assert config_drift(_document([_rules("a")]), _point("w0", 5)) is None


def test_only_the_task_a_continuation_enters_at_sees_the_resume_point() -> None:
    seen: list[ResumePoint | None] = []
    register_task_type("test-sees-resume", lambda task, memory, turn: seen.append(turn.resume))
    task = {"id": "s", "type": "test-sees-resume"}
    document = _document([task, task, task], [task])
    point = _point("w0", 1)
    run_lifecycle(
        document, _memory(), TurnContext(agent_document=document, conversation_id="c"), resume=point
    )
    assert seen == [point, None, None]
    seen.clear()
    run_lifecycle(document, _memory(), TurnContext(agent_document=document, conversation_id="c"))
    assert seen == [None, None, None, None]


def test_a_task_returning_a_pause_request_pauses_the_turn_at_itself() -> None:
    request = PauseRequest("TOOL_CALL", "transfer needs approval", tool_names=["transfer"])
    register_task_type("test-gated", lambda task, memory, turn: request)
    document = _document([_rules("a"), {"id": "g", "type": "test-gated"}, _rules("b")])
    memory = _memory()
    outcome = run_lifecycle(document, memory, TurnContext(agent_document=document, conversation_id="c"))
    assert outcome == Paused(workflow_id="w0", task_index=1, request=request)
    assert memory.current.actions == ["a"]
