"""Which toolApprovals config gates an LLM task, and what its numbers mean at run time.

The agent's ``hitlConfig.toolApprovals`` and the task's own ``toolApprovals`` are combined per
``HITL_TASK_APPROVALS_MODE``: under ``strict`` (the default) the task can only strengthen the agent's
gate; under ``replace`` a task block replaces the agent's wholesale. Everything here is pure: the
caller reads the settings (``HITL_TOOL_ENABLED=false`` means no config at all, so the gate is inert)
and the stored documents.
"""

from __future__ import annotations

from typing import Any

UNDETERMINED_REASON = (
    "The agent's tool-approval policy could not be read, so every tool call requires approval until it "
    "can be. This is a fail-closed fallback, not the agent's configured policy."
)
# The config used when the agent's policy cannot be read. Compared by identity: never mutate it.
UNDETERMINED: dict[str, Any] = {"requireApproval": ["*"], "pauseReason": UNDETERMINED_REASON}

AUTO_APPROVE = "AUTO_APPROVE"
WAIT_INDEFINITELY = "WAIT_INDEFINITELY"
NO_PROGRESS_ACTIONS = ("WAIT_FOR_HUMAN", "AUTO_REJECT", "ABORT")
DEFAULT_MAX_PAUSES = 3
DEFAULT_MAX_AUTO_APPROVALS = 2
_TEXT_FIELDS = ("approvalTimeout", "onNoProgress", "pauseReason", "pendingMessage", "inGroupTurns")


def is_replace_mode(mode: str | None) -> bool:
    """Only ``replace`` (trimmed, any case) replaces; anything else, a typo included, is strict."""
    return isinstance(mode, str) and mode.strip().lower() == "replace"


def effective_tool_approvals(agent: dict | None, task: dict | None, *, mode: str) -> dict | None:
    """The config that gates one LLM task: the agent's block combined with the task's per ``mode``.

    A policy that could not be read (``UNDETERMINED``) is returned as is in both modes: it gates
    every call. No task block means the agent's; ``replace`` means the task's wholesale. ``strict``
    lets the task only strengthen the agent's gate (see ``_strengthen``).
    """
    if agent is UNDETERMINED:
        return agent
    if task is None:
        return agent
    if is_replace_mode(mode):
        return task
    return _strengthen(agent or {}, task)


def _strengthen(agent: dict, task: dict) -> dict:
    """Strict mode: the task block adds friction, it never removes any.

    - requireApproval is the agent's patterns then the task's new ones; an empty task list cannot
      switch the agent's gate off.
    - exempt is the agent's only: an exemption is exactly how a task would ungate a tool.
    - a task AUTO_APPROVE becomes WAIT_INDEFINITELY unless the agent's own policy is AUTO_APPROVE;
      every task rule's AUTO_APPROVE becomes WAIT_INDEFINITELY whatever the agent says.
    - maxAutoApprovalsPerTurn is the smaller of the two (the agent's default being 2).
    - the text fields and maxPausesPerTurn are the task's when it states them.
    - rules: the task's first (they win specificity ties), then the agent's.
    """
    merged: dict[str, Any] = {}
    require = _union(agent.get("requireApproval"), task.get("requireApproval"))
    if require:
        merged["requireApproval"] = require
    if isinstance(agent.get("exempt"), list):
        merged["exempt"] = list(agent["exempt"])
    policy = _strict_task_policy(agent.get("timeoutPolicy"), task.get("timeoutPolicy"))
    if policy is not None:
        merged["timeoutPolicy"] = policy
    for name in _TEXT_FIELDS:
        value = task.get(name) if _stated(task.get(name)) else agent.get(name)
        if value is not None:
            merged[name] = value
    max_pauses = task.get("maxPausesPerTurn")
    if max_pauses is None:
        max_pauses = agent.get("maxPausesPerTurn")
    if max_pauses is not None:
        merged["maxPausesPerTurn"] = max_pauses
    max_auto = _strict_max_auto_approvals(
        agent.get("maxAutoApprovalsPerTurn"), task.get("maxAutoApprovalsPerTurn")
    )
    if max_auto is not None:
        merged["maxAutoApprovalsPerTurn"] = max_auto
    rules = [_demote_rule(rule) for rule in _list(task.get("rules"))] + _list(agent.get("rules"))
    if rules:
        merged["rules"] = rules
    return merged


def _union(agent_patterns: object, task_patterns: object) -> list[str]:
    union = list(_list(agent_patterns))
    union += [pattern for pattern in _list(task_patterns) if pattern not in union]
    return union


def _strict_task_policy(agent_policy: object, task_policy: object) -> object:
    if not _stated(task_policy):
        return agent_policy
    if task_policy == AUTO_APPROVE and agent_policy != AUTO_APPROVE:
        return WAIT_INDEFINITELY
    return task_policy


def _strict_max_auto_approvals(agent_max: object, task_max: object) -> object:
    if task_max is None:
        return agent_max
    if not _is_int(task_max):
        return agent_max
    agent_value = agent_max if _is_int(agent_max) else DEFAULT_MAX_AUTO_APPROVALS
    return min(agent_value, task_max)


def _demote_rule(rule: object) -> object:
    if isinstance(rule, dict) and rule.get("timeoutPolicy") == AUTO_APPROVE:
        return {**rule, "timeoutPolicy": WAIT_INDEFINITELY}
    return rule


def gate_active(config: dict | None) -> bool:
    """Absent or empty requireApproval means the gate is off: every call runs."""
    if not isinstance(config, dict):
        return False
    require = config.get("requireApproval")
    return isinstance(require, list) and len(require) > 0


def effective_tool_timeout(rule: dict | None, tool_approvals: dict | None, hitl_config: dict | None) -> dict:
    """The timeout policy and duration of a tool pause (docs/tool-gating.md, "Effective timeout policy").

    Policy: the governing rule's, verbatim (AUTO_APPROVE included: the most specific statement);
    else toolApprovals', verbatim (an explicit AUTO_APPROVE at the tool level is an opt-in); else
    hitlConfig's with AUTO_APPROVE demoted to WAIT_INDEFINITELY — an inherited AUTO_APPROVE never
    auto-runs a gated tool; else WAIT_INDEFINITELY. The duration walks the same chain on its own, so
    a rule that states only a policy still inherits a clock.
    """
    policy = _first_stated("timeoutPolicy", rule, tool_approvals)
    if policy is None:
        inherited = _first_stated("timeoutPolicy", hitl_config)
        policy = WAIT_INDEFINITELY if inherited in (None, AUTO_APPROVE) else inherited
    duration = _first_stated("approvalTimeout", rule, tool_approvals, hitl_config)
    return {"timeoutPolicy": policy, "approvalTimeout": duration}


def clamp_max_pauses(config: dict | None) -> int:
    """maxPausesPerTurn as the tool loop applies it: default 3, clamped to 1..10 even if stored wrong."""
    return _clamped(config, "maxPausesPerTurn", DEFAULT_MAX_PAUSES, 1, 10)


def clamp_max_auto_approvals(config: dict | None) -> int:
    """maxAutoApprovalsPerTurn as the guard applies it: default 2, clamped to 0..10."""
    return _clamped(config, "maxAutoApprovalsPerTurn", DEFAULT_MAX_AUTO_APPROVALS, 0, 10)


def on_no_progress(config: dict | None) -> str:
    """onNoProgress as the guard applies it: an absent or unknown value means WAIT_FOR_HUMAN."""
    value = config.get("onNoProgress") if isinstance(config, dict) else None
    return value if value in NO_PROGRESS_ACTIONS else "WAIT_FOR_HUMAN"


def _clamped(config: dict | None, name: str, default: int, low: int, high: int) -> int:
    value = config.get(name) if isinstance(config, dict) else None
    if not _is_int(value):
        return default
    return max(low, min(high, value))


def _first_stated(name: str, *configs: dict | None) -> Any:
    for config in configs:
        if isinstance(config, dict) and _stated(config.get(name)):
            return config[name]
    return None


def _stated(value: object) -> bool:
    """Set and, for text, not blank: a blank string states nothing and falls back."""
    if value is None:
        return False
    return not (isinstance(value, str) and not value.strip())


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _list(value: object) -> list:
    return list(value) if isinstance(value, list) else []
