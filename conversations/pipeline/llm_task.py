"""The ``llm`` task: a model with tools, behind the approval gate (the loop itself is in toolgate).

A fresh turn builds the chat messages (system message, recent history, the user's input) and runs the
tool loop. When the loop meets gated calls, the task raises PauseRequested: the pause, its batch and
its deadline are committed together, and the step shows why it stalled (the pending message). When the
continuation of that pause reaches this task again, it re-enters the loop from the frozen transcript
with the reviewer's verdicts applied.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from approvals import metrics
from approvals.actors import system_actor
from approvals.audit import append_audit_entry
from approvals.models import Pause, SubjectType, TimeoutPolicy
from conversations.lifecycle import PauseRequested
from conversations.pipeline.memory import ConversationMemory
from conversations.pipeline.registry import TurnContext
from toolgate.approval_config import validate_tool_approvals
from toolgate.batches import PendingBatch, store_batch
from toolgate.loop import LoopSettings, LoopState, run_tool_loop
from toolgate.models import PendingToolBatch
from toolgate.no_progress import GuardTrip, check_guard
from toolgate.precedence import UNDETERMINED, effective_tool_approvals
from toolgate.providers import chat_model_for
from toolgate.resume import CONFIG_DRIFT_TEXT, ConfigDrift, resume_state
from toolgate.sources import toolset_for
from toolgate.tools import ToolContext

MAX_ITERATIONS_DEFAULT = 8
HISTORY_DEFAULT = 10
RESUME_KEY = "hitl:tool_resume_pause"
PENDING_KEY = "hitl:pending_output"


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
    agent = _readable(hitl_config.get("toolApprovals") if isinstance(hitl_config, dict) else None,
                      "hitlConfig.toolApprovals")
    return effective_tool_approvals(agent, _readable(task.get("toolApprovals"), "toolApprovals"),
                                    mode=settings.HITL_TASK_APPROVALS_MODE)


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
    from conversations.nested_agents import talk_to_agent

    facts = memory.properties.setdefault("userFacts", {})

    def forget(key: str) -> bool:
        return facts.pop(key, None) is not None

    caller = memory.caller
    return ToolContext(
        conversation_id=memory.conversation_id, agent_id=turn.agent_id, environment=turn.environment,
        caller_username=caller.username if caller else "", caller_token=caller.token if caller else "",
        template_data=memory.template_data(), set_property=memory.set_property,
        remember=lambda key, value: facts.__setitem__(key, value), forget=forget,
        recall_facts=lambda: dict(facts), search_history=memory.search_history,
        talk_to_agent=lambda **kwargs: talk_to_agent(caller_username=caller.username if caller else "",
                                                     parent_conversation_id=memory.conversation_id,
                                                     environment=turn.environment, **kwargs),
        check_cancelled=turn.check_cancelled,
    )


def _drop_pending_output(memory: ConversationMemory) -> None:
    for text in memory.current.data.pop(PENDING_KEY, []):
        for index in range(len(memory.current.output) - 1, -1, -1):
            if memory.current.output[index] == text:
                del memory.current.output[index]
                break


def _guard_effects(trip: GuardTrip | None, batch: PendingBatch) -> tuple[Any, Any]:
    """What a guard trip does to the new pause: (inside the commit, after the commit)."""
    if trip is None:
        return None, None
    if trip.action == "WAIT_FOR_HUMAN":
        batch.timeout_config = {"timeoutPolicy": TimeoutPolicy.WAIT_INDEFINITELY, "approvalTimeout": ""}

    def record(pause: Pause) -> None:
        metrics.count_tool_guard(trip.guard)
        append_audit_entry(
            subject_type=SubjectType.CONVERSATION, subject_id=pause.subject_id, verb=f"hitl.tool.{trip.guard}",
            actor="system:no-progress", automated=True, conversation_id=pause.subject_id, pause_id=pause.id,
            epoch=pause.epoch, detail={"guard": trip.guard, "action": trip.action, "fingerprint": batch.fingerprint,
                                       "autoApproveCount": batch.auto_approve_count},
        )

    def act(pause: Pause) -> None:
        from approvals.decision_input import DecisionInput
        from approvals.decisions import cancel_pending_pause, decide_pause

        actor = system_actor("no-progress")
        if trip.action == "AUTO_REJECT":
            decide_pause(surface=pause.surface, subject_type=pause.subject_type, subject_id=pause.subject_id,
                         decision=DecisionInput(verdict="REJECTED", note="Automatic reject-all: repeated tool-call "
                                                "pause made no progress"), actor=actor, expected_pause_id=pause.id)
        elif trip.action == "ABORT":
            cancel_pending_pause(pause=pause, actor=actor, mode="NO_PROGRESS_ABORT")

    return record, (act if trip.action in ("AUTO_REJECT", "ABORT") else None)


def _pause(batch: PendingBatch, memory: ConversationMemory, resumed: Pause | None,
           previous: PendingToolBatch | None) -> PauseRequested:
    trip = check_guard(batch, resumed, previous)
    record, act = _guard_effects(trip, batch)
    memory.current.data["hitl:tool_pause_count"] = batch.pause_count_this_turn
    shown = [text for text in (batch.interim_text, batch.pending_message) if text]
    if batch.interim_text == batch.pending_message:
        shown = [batch.pending_message]
    memory.current.output.extend(shown)
    memory.current.data[PENDING_KEY] = shown

    def on_committed(pause: Pause) -> None:
        store_batch(pause, batch)
        if record is not None:
            record(pause)

    return PauseRequested("TOOL_CALL", batch.reason, tool_names=batch.tool_names,
                          timeout_config=batch.timeout_config, on_committed=on_committed, after_commit=act,
                          matched_rules=batch.matched_rules)


def run(task: dict[str, Any], memory: ConversationMemory, turn: TurnContext) -> None:
    document = turn.agent_document
    toolset = toolset_for(task, document)
    context = tool_context(memory, turn)
    loop = LoopSettings(
        llm_task_id=task["id"], config=effective_config(document, task), hitl_config=document.get("hitlConfig"),
        max_iterations=max(1, min(50, int(task.get("maxToolIterations", MAX_ITERATIONS_DEFAULT)))),
        user_input=memory.current.input,
    )
    resumed: Pause | None = None
    previous: PendingToolBatch | None = None
    pause_id = memory.current.data.pop(RESUME_KEY, None)
    if pause_id:
        _drop_pending_output(memory)
        previous = PendingToolBatch.objects.select_related("pause").get(pk=pause_id)
        resumed = previous.pause

        def rebuild(batch: PendingToolBatch) -> list[dict[str, Any]]:
            messages = initial_messages(task, memory)
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": c.call_id, "type": "function", "function": {"name": c.tool_name, "arguments": c.arguments_raw}}
                for c in batch.calls.all()]})
            return messages

        try:
            state = resume_state(previous, task["id"], toolset, context, rebuild)
        except ConfigDrift as drift:
            memory.current.output.append(CONFIG_DRIFT_TEXT)
            append_audit_entry(
                subject_type=SubjectType.CONVERSATION, subject_id=resumed.subject_id, verb="hitl.tool.config_drift",
                actor="system:toolgate", automated=True, conversation_id=resumed.subject_id, pause_id=resumed.id,
                epoch=resumed.epoch, detail={"reason": str(drift)},
            )
            return
    else:
        state = LoopState(messages=initial_messages(task, memory),
                          pauses_so_far=int(memory.current.data.get("hitl:tool_pause_count", 0)))
    outcome = run_tool_loop(model=chat_model_for(task["provider"]), toolset=toolset, context=context,
                            state=state, loop=loop)
    memory.current.data[f"llm:{task['id']}:trace"] = json.loads(json.dumps(outcome.trace, default=str))[-50:]
    if outcome.batch is not None:
        raise _pause(outcome.batch, memory, resumed, previous)
    reply = outcome.reply or ""
    if reply:
        memory.current.output.append(reply)
    memory.current.outputs[task["id"]] = reply
