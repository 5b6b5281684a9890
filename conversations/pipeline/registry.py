"""Which function runs a lifecycle task of a given ``type``.

A task runner is ``run(task: dict, memory: ConversationMemory, turn: TurnContext) -> PauseRequest | None``:
it reads the task's configuration and mutates ``memory.current`` (actions, output, outputs, data) and
``memory.properties``; it returns None to let the turn go on, or a PauseRequest
(conversations.pipeline.pausing) to make it wait for a human. Later layers (the LLM task of toolgate) register
their own types here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from conversations.pipeline.conversation_memory import Caller, ConversationMemory
from conversations.pipeline.pausing import PauseRequest, ResumePoint

if TYPE_CHECKING:
    from toolgate.runtime import Continuing


@dataclass
class TurnContext:
    """Per-turn facts a task may need besides memory."""

    agent_document: dict[str, Any]
    conversation_id: str
    agent_id: str = ""
    environment: str = "production"
    extras: dict[str, Any] = field(default_factory=dict)
    # Raises when a cancel of this turn was recorded (conversations.lifecycle.TurnCancelled); set by the
    # services that run a stored conversation's turn, absent in pipeline unit tests.
    check_cancelled: Callable[[], None] | None = None
    # Set only for the task a continuation enters at (conversations.lifecycle.run_lifecycle).
    resume: ResumePoint | None = None
    # Talks to another deployed agent in a nested conversation (conversations.nested_agents.talk_to_agent,
    # with the turn services it runs on); set by the services that run a stored conversation's turn.
    talk_to_agent: Callable[..., dict[str, Any]] | None = None
    # The decided pause this turn continues (None for a new turn): its http calls go through the step
    # journal (toolgate.runtime.step_journal), so a second run of the same continuation never sends one twice.
    continuing: Continuing | None = None
    # Who the approved calls of the tool batch this continuation resumes act as (conversations.
    # acting_identity.approver_caller); None: they act for the turn's user, like every other call.
    approver: Caller | None = None

    def stop_if_cancelled(self) -> None:
        if self.check_cancelled is not None:
            self.check_cancelled()


TaskRunner = Callable[[dict[str, Any], ConversationMemory, TurnContext], PauseRequest | None]

_RUNNERS: dict[str, TaskRunner] = {}


def register_task_type(task_type: str, runner: TaskRunner) -> None:
    _RUNNERS[task_type] = runner


def runner_for(task_type: str) -> TaskRunner:
    try:
        return _RUNNERS[task_type]
    except KeyError:
        raise LookupError(f"no runner for task type '{task_type}'") from None
