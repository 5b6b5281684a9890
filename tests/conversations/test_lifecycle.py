"""The lifecycle runner: where a turn pauses, stops, and where a continuation picks up."""

from __future__ import annotations

import pytest

from conversations.lifecycle import ConfigDrift, PauseRequested, run_lifecycle
from conversations.pipeline.memory import ConversationMemory, Step
from conversations.pipeline.registry import TurnContext, register_task_type
from conversations.pipeline.tasks import register_builtin_tasks


def _memory(actions: list[str] | None = None) -> ConversationMemory:
    return ConversationMemory(conversation_id="c", current=Step(input="x", actions=list(actions or [])))


def _rules(*actions: str) -> dict:
    return {"id": f"r-{'-'.join(actions)}", "type": "behavior_rules",
            "rules": [{"name": "always", "actions": list(actions), "conditions": []}]}


def _document(*workflows: list[dict]) -> dict:
    return {"name": "t", "workflows": [{"id": f"w{i}", "tasks": tasks} for i, tasks in enumerate(workflows)]}


@pytest.fixture(autouse=True)
def _tasks() -> None:
    register_builtin_tasks()


def test_a_task_that_adds_pause_conversation_pauses_after_itself() -> None:
    document = _document([_rules("a"), _rules("PAUSE_CONVERSATION"), _rules("b")])
    memory = _memory()
    outcome = run_lifecycle(document, memory, TurnContext(agent_document=document, conversation_id="c"))
    assert (outcome.kind, outcome.workflow_id, outcome.task_index) == ("paused", "w0", 1)
    assert "b" not in memory.current.actions


def test_a_stale_pause_conversation_never_re_pauses() -> None:
    document = _document([_rules("a"), _rules("PAUSE_CONVERSATION")])
    memory = _memory(["PAUSE_CONVERSATION"])  # already there before any task ran
    outcome = run_lifecycle(document, memory, TurnContext(agent_document=document, conversation_id="c"))
    assert outcome.kind == "completed"


def test_stop_conversation_beats_pause_in_the_same_step() -> None:
    document = _document([_rules("PAUSE_CONVERSATION", "STOP_CONVERSATION")])
    outcome = run_lifecycle(document, _memory(), TurnContext(agent_document=document, conversation_id="c"))
    assert outcome.kind == "stopped"


def test_resume_runs_the_rest_of_the_paused_workflow_and_every_later_workflow() -> None:
    document = _document([_rules("a"), _rules("b"), _rules("c")], [_rules("d")])
    memory = _memory()
    outcome = run_lifecycle(document, memory, TurnContext(agent_document=document, conversation_id="c"),
                            resume_at=("w0", 2))
    assert outcome.kind == "completed"
    assert memory.current.actions == ["c", "d"]


def test_resuming_at_the_end_of_a_workflow_runs_nothing_of_it() -> None:
    document = _document([_rules("a")], [_rules("d")])
    memory = _memory()
    run_lifecycle(document, memory, TurnContext(agent_document=document, conversation_id="c"), resume_at=("w0", 1))
    assert memory.current.actions == ["d"]


def test_a_missing_paused_workflow_is_config_drift() -> None:
    document = _document([_rules("a")])
    with pytest.raises(ConfigDrift, match="no longer exists"):
        run_lifecycle(document, _memory(), TurnContext(agent_document=document, conversation_id="c"),
                      resume_at=("gone", 0))


def test_a_task_raising_pause_requested_pauses_with_its_kind_and_reason() -> None:
    def gated(task, memory, turn):
        raise PauseRequested("TOOL_CALL", "transfer needs approval", tool_names=["transfer"])

    register_task_type("test-gated", gated)
    document = _document([_rules("a"), {"id": "g", "type": "test-gated"}])
    outcome = run_lifecycle(document, _memory(), TurnContext(agent_document=document, conversation_id="c"))
    assert (outcome.kind, outcome.pause_kind, outcome.task_index) == ("paused", "TOOL_CALL", 1)
    assert outcome.tool_names == ["transfer"]
