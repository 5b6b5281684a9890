"""The ``llm`` task: a model with tools, behind the approval gate (the loop itself is in toolgate).

A fresh turn builds the chat messages (system message, recent history, the user's input) and runs the
tool loop. When the loop meets gated calls, the task returns a PauseRequest carrying the batch: the
pause, its batch and its deadline are committed together, and the step shows why it stalled (the pending
message). The continuation of that pause enters at this task with the batch on its resume point
(``turn.resume``) and re-enters the loop from the frozen transcript with the reviewer's verdicts applied.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from django.conf import settings

from approvals.audit import append_audit_entry
from approvals.models import Pause, PauseKind, SubjectType
from conversations.pipeline.conversation_memory import ConversationMemory
from conversations.pipeline.pausing import PauseRequest, ResumePoint
from conversations.pipeline.registry import TurnContext
from toolgate.gate import (
    UNDETERMINED,
    PendingBatch,
    ToolContext,
    effective_tool_approvals,
    validate_tool_approvals,
)
from toolgate.models import PendingToolBatch
from toolgate.runtime import (
    CONFIG_DRIFT_TEXT,
    LoopSettings,
    LoopState,
    chat_model_for,
    check_guard,
    resume_state,
    run_tool_loop,
    toolset_for,
    wait_for_human_timeout,
)

MAX_ITERATIONS_DEFAULT = 8
HISTORY_DEFAULT = 10


def _readable(config: Any, path: str) -> Any:
    """A toolApprovals block that is not a valid object gates every call (fail closed)."""
    if config is None:
        return None
    if not isinstance(config, dict) or validate_tool_approvals(config, path):
        return UNDETERMINED
    return config


def effective_config(document: dict[str, Any], task: dict[str, Any]) -> dict[str, Any] | None:
    if not settings.HITL_TOOL_ENABLED:
        return None
    hitl_config = document.get("hitlConfig")
    agent = _readable(
        hitl_config.get("toolApprovals") if isinstance(hitl_config, dict) else None,
        "hitlConfig.toolApprovals",
    )
    return effective_tool_approvals(
        agent, _readable(task.get("toolApprovals"), "toolApprovals"), mode=settings.HITL_TASK_APPROVALS_MODE
    )


def initial_messages(task: dict[str, Any], memory: ConversationMemory) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if task.get("systemMessage"):
        messages.append({"role": "system", "content": task["systemMessage"]})
    limit = int(task.get("conversationHistoryLimit", HISTORY_DEFAULT))
    for step in memory.recent(limit):
        if step.input:
            messages.append({"role": "user", "content": step.input})
        if step.output:
            messages.append({"role": "assistant", "content": "\n".join(step.output)})
    messages.append({"role": "user", "content": memory.current.input})
    return messages


def tool_context(memory: ConversationMemory, turn: TurnContext) -> ToolContext:
    facts = memory.properties.setdefault("userFacts", {})

    def forget(key: str) -> bool:
        return facts.pop(key, None) is not None

    caller = memory.caller
    talk = turn.talk_to_agent
    return ToolContext(
        conversation_id=memory.conversation_id,
        agent_id=turn.agent_id,
        environment=turn.environment,
        caller_username=caller.username if caller else "",
        caller_token=caller.token if caller else "",
        template_data=memory.template_data(),
        set_property=memory.set_property,
        remember=lambda key, value: facts.__setitem__(key, value),
        forget=forget,
        recall_facts=lambda: dict(facts),
        search_history=memory.search_history,
        talk_to_agent=None
        if talk is None
        else (
            lambda **kwargs: talk(
                caller_username=caller.username if caller else "",
                parent_conversation_id=memory.conversation_id,
                environment=turn.environment,
                **kwargs,
            )
        ),
        check_cancelled=turn.check_cancelled,
    )


def approved_calls_context(context: ToolContext, turn: TurnContext) -> ToolContext:
    """The context the approved calls of the resumed batch run in: the human approver's identity
    (``${caller:token}`` is their token: they saw and approved each request), else the turn's own
    (conversations.acting_identity.approver_caller). A nested conversation such a call starts still
    belongs to the turn's user: the calls it makes are ones the approver never saw."""
    approver = turn.approver
    if approver is None:
        return context
    return dataclasses.replace(context, caller_username=approver.username, caller_token=approver.token)


def shown_while_pending(interim: str, pending: str) -> list[str]:
    """What a tool pause adds to the step's output while it waits: the model's interim text, then the
    pending message (once, when they are the same)."""
    if interim == pending:
        return [pending]
    return [text for text in (interim, pending) if text]


def drop_pending_output(memory: ConversationMemory, batch: PendingToolBatch) -> None:
    """The turn goes on: what the pause showed while it waited leaves the step (the last occurrence of each)."""
    for text in shown_while_pending(batch.interim_text, batch.pending_message):
        for index in range(len(memory.current.output) - 1, -1, -1):
            if memory.current.output[index] == text:
                del memory.current.output[index]
                break


def apply_config_drift(
    memory: ConversationMemory, point: ResumePoint, *, conversation_id: Any, pause: Pause, reason: str
) -> None:
    """A tool pause that drifted (conversations.lifecycle.config_drift) applies nothing of its batch: the
    step says so instead of what it showed while waiting, and the ledger records why."""
    if point.tool_batch is not None:
        drop_pending_output(memory, point.tool_batch)
    memory.current.output.append(CONFIG_DRIFT_TEXT)
    append_audit_entry(
        subject_type=SubjectType.CONVERSATION,
        subject_id=conversation_id,
        verb="hitl.tool.config_drift",
        actor="system:toolgate",
        automated=True,
        conversation_id=conversation_id,
        pause_id=pause.id,
        epoch=pause.epoch,
        detail={"reason": reason},
    )


def _pause(
    batch: PendingBatch, memory: ConversationMemory, resumed: Pause | None, previous: PendingToolBatch | None
) -> PauseRequest:
    trip = check_guard(batch, resumed, previous)
    batch.timeout_config = wait_for_human_timeout(trip, batch.timeout_config)
    memory.current.data["hitl:tool_pause_count"] = batch.pause_count_this_turn
    memory.current.output.extend(shown_while_pending(batch.interim_text, batch.pending_message))
    return PauseRequest(
        PauseKind.TOOL_CALL,
        batch.reason,
        tool_names=batch.tool_names,
        timeout_config=batch.timeout_config,
        matched_rules=batch.matched_rules,
        tool_batch=batch,
        guard_trip=trip,
    )


def run(task: dict[str, Any], memory: ConversationMemory, turn: TurnContext) -> PauseRequest | None:
    document = turn.agent_document
    toolset = toolset_for(task, document)
    context = tool_context(memory, turn)
    loop = LoopSettings(
        llm_task_id=task["id"],
        config=effective_config(document, task),
        hitl_config=document.get("hitlConfig"),
        max_iterations=max(1, min(50, int(task.get("maxToolIterations", MAX_ITERATIONS_DEFAULT)))),
        user_input=memory.current.input,
    )
    previous = turn.resume.tool_batch if turn.resume is not None else None
    resumed: Pause | None = previous.pause if previous is not None else None
    if previous is not None:
        drop_pending_output(memory, previous)

        def rebuild(batch: PendingToolBatch) -> list[dict[str, Any]]:
            messages = initial_messages(task, memory)
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": c.call_id,
                            "type": "function",
                            "function": {"name": c.tool_name, "arguments": c.arguments_raw},
                        }
                        for c in batch.calls.all()
                    ],
                }
            )
            return messages

        state = resume_state(
            previous, toolset, rebuild, approved_context=approved_calls_context(context, turn)
        )
    else:
        state = LoopState(
            messages=initial_messages(task, memory),
            pauses_so_far=int(memory.current.data.get("hitl:tool_pause_count", 0)),
        )
    outcome = run_tool_loop(
        model=chat_model_for(task["provider"]), toolset=toolset, context=context, state=state, loop=loop
    )
    memory.current.data[f"llm:{task['id']}:trace"] = json.loads(json.dumps(outcome.trace, default=str))[-50:]
    if outcome.batch is not None:
        return _pause(outcome.batch, memory, resumed, previous)
    reply = outcome.reply or ""
    if reply:
        memory.current.output.append(reply)
    memory.current.outputs[task["id"]] = reply
    return None
