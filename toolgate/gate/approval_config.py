"""Save-time validation of a ``toolApprovals`` block, and its warnings.

The block is checked where it is written — ``hitlConfig.toolApprovals`` and each llm task's
``toolApprovals`` — so a bad pattern or a policy that can never fire is a 400 naming the field, not a
gate that silently degrades at run time. Each block is checked on its own: a finite
``timeoutPolicy`` needs the block's own ``approvalTimeout`` (a rule may inherit the block's).
"""

from __future__ import annotations

import json

from approvals.hitl_config import (
    allow_self_approval_errors,
    approval_timeout_errors,
    is_finite_policy,
    timeout_errors,
    timeout_policy_errors,
)
from approvals.routing import ROUTING_KEYS, routing_errors
from common.field_errors import FieldError, utf16_length
from toolgate.gate.patterns import validate_pattern
from toolgate.gate.precedence import (
    AUTO_APPROVE,
    NO_PROGRESS_ACTIONS,
    effective_tool_approvals,
    is_replace_mode,
)

TOOL_APPROVALS_KEYS = (
    "requireApproval",
    "exempt",
    "maxPausesPerTurn",
    "maxAutoApprovalsPerTurn",
    "onNoProgress",
    "approvalTimeout",
    "timeoutPolicy",
    "pauseReason",
    "pendingMessage",
    "inGroupTurns",
    "rules",
)
RULE_KEYS = (
    "match",
    "timeoutPolicy",
    "approvalTimeout",
    "pauseReason",
    "pendingMessage",
    "allowSelfApproval",
    *ROUTING_KEYS,
)
TEXT_MAX = 500


def validate_tool_approvals(config: object, field_path: str) -> list[FieldError]:
    """Every problem of one toolApprovals block, each under its full path below ``field_path``."""
    if config is None:
        return []
    if not isinstance(config, dict):
        return [FieldError(field_path, f"{field_path} must be an object")]
    errors = _unknown_keys(config, field_path, TOOL_APPROVALS_KEYS, "toolApprovals")
    require, require_errors = _pattern_list(config.get("requireApproval"), f"{field_path}.requireApproval")
    exempt, exempt_errors = _pattern_list(config.get("exempt"), f"{field_path}.exempt")
    errors += require_errors + exempt_errors
    if _non_empty_list(config.get("exempt")) and not _non_empty_list(config.get("requireApproval")):
        errors.append(
            FieldError(
                f"{field_path}.exempt", f"{field_path}.exempt has no effect without requireApproval patterns"
            )
        )
    for index, pattern in exempt.items():
        if pattern in require.values():
            errors.append(
                FieldError(
                    f"{field_path}.exempt[{index}]",
                    f"pattern '{pattern}' appears in both {field_path}.requireApproval and .exempt; "
                    "exempt would win — remove one",
                )
            )
    errors += _range_errors(config.get("maxPausesPerTurn"), f"{field_path}.maxPausesPerTurn", 1, 10)
    errors += _range_errors(
        config.get("maxAutoApprovalsPerTurn"), f"{field_path}.maxAutoApprovalsPerTurn", 0, 10
    )
    errors += _no_progress_errors(config.get("onNoProgress"), field_path)
    errors += _in_group_turns_errors(config.get("inGroupTurns"), field_path)
    errors += timeout_errors(config, field_path)
    errors += _text_errors(config, field_path)
    errors += _rules_errors(config, field_path, set(exempt.values()))
    return errors


def _pattern_list(value: object, list_path: str) -> tuple[dict[int, str], list[FieldError]]:
    """The valid patterns of a pattern list by index, and the errors of the others."""
    if value is None:
        return {}, []
    if not isinstance(value, list):
        return {}, [FieldError(list_path, f"{list_path} must be an array of patterns")]
    valid: dict[int, str] = {}
    errors: list[FieldError] = []
    for index, pattern in enumerate(value):
        problem = validate_pattern(pattern)
        if problem is not None:
            errors.append(FieldError(f"{list_path}[{index}]", f"{list_path}[{index}]: {problem}"))
        elif pattern in valid.values():
            errors.append(
                FieldError(f"{list_path}[{index}]", f"duplicate pattern '{pattern}' in {list_path}")
            )
        else:
            valid[index] = pattern
    return valid, errors


def _rules_errors(config: dict, field_path: str, exempt: set[str]) -> list[FieldError]:
    rules_path = f"{field_path}.rules"
    rules = config.get("rules")
    if rules is None:
        return []
    if not isinstance(rules, list):
        return [FieldError(rules_path, f"{rules_path} must be an array of rules")]
    if not rules:
        return []
    errors: list[FieldError] = []
    if not _non_empty_list(config.get("requireApproval")):
        errors.append(
            FieldError(
                rules_path,
                f"{rules_path} has no effect without requireApproval patterns — rules tune the friction "
                "on a gated call, they never gate one",
            )
        )
    seen: set[str] = set()
    for index, rule in enumerate(rules):
        errors += _rule_errors(rule, f"{rules_path}[{index}]", field_path, config, exempt, seen)
    return errors


def _rule_errors(
    rule: object, rule_path: str, field_path: str, config: dict, exempt: set[str], seen: set[str]
) -> list[FieldError]:
    if rule is None:
        return [FieldError(rule_path, f"{rule_path} must not be null")]
    if not isinstance(rule, dict):
        return [FieldError(rule_path, f"{rule_path} must be an object")]
    errors = _unknown_keys(rule, rule_path, RULE_KEYS, "rule")
    match = rule.get("match")
    problem = validate_pattern(match)
    if problem is not None:
        errors.append(FieldError(f"{rule_path}.match", f"{rule_path}.match: {problem}"))
    elif match in seen:
        errors.append(
            FieldError(
                f"{rule_path}.match",
                f"duplicate rule match '{match}' in {field_path}.rules — only one would ever apply; merge them",
            )
        )
    elif match in exempt:
        errors.append(
            FieldError(
                f"{rule_path}.match",
                f"{rule_path}.match '{match}' is also an exempt pattern, so it can never apply — an exempt "
                "call is never gated, and a rule only tunes a gated call. Remove the rule or the exemption",
            )
        )
    if problem is None:
        seen.add(match)
    policy = rule.get("timeoutPolicy")
    policy_errors = timeout_policy_errors(policy, rule_path)
    errors += policy_errors
    errors += approval_timeout_errors(rule.get("approvalTimeout"), finite_policy=False, field_path=rule_path)
    if (
        not policy_errors
        and is_finite_policy(policy)
        and _blank(rule.get("approvalTimeout"))
        and _blank(config.get("approvalTimeout"))
    ):
        errors.append(
            FieldError(
                f"{rule_path}.timeoutPolicy",
                f"{rule_path}.timeoutPolicy is {policy}, which never fires without a duration — set "
                f'{rule_path}.approvalTimeout (ISO-8601, e.g. "PT5M") or {field_path}.approvalTimeout '
                "for the rule to inherit",
            )
        )
    errors += _text_errors(rule, rule_path)
    errors += allow_self_approval_errors(rule.get("allowSelfApproval"), rule_path)
    errors += routing_errors(rule, rule_path)
    return errors


def _range_errors(value: object, path: str, low: int, high: int) -> list[FieldError]:
    if value is None:
        return []
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return []
    return [FieldError(path, f"{path} must be between {low} and {high}, got {json.dumps(value)}")]


def _no_progress_errors(value: object, field_path: str) -> list[FieldError]:
    if value is None or value in NO_PROGRESS_ACTIONS:
        return []
    path = f"{field_path}.onNoProgress"
    return [FieldError(path, f"{path} {_shown(value)} must be one of {', '.join(NO_PROGRESS_ACTIONS)}")]


def _in_group_turns_errors(value: object, field_path: str) -> list[FieldError]:
    path = f"{field_path}.inGroupTurns"
    if value is None or value == "REJECT":
        return []
    if value == "INBOX":
        return [FieldError(path, f"{path}=INBOX is reserved for a future version; use REJECT")]
    return [FieldError(path, f"{path} {_shown(value)} must be REJECT (INBOX is reserved)")]


def _text_errors(config: dict, field_path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for name in ("pauseReason", "pendingMessage"):
        value, path = config.get(name), f"{field_path}.{name}"
        if value is None:
            continue
        if not isinstance(value, str):
            errors.append(FieldError(path, f"{path} must be a string"))
        elif utf16_length(value) > TEXT_MAX:
            errors.append(FieldError(path, f"{path} exceeds the maximum length of {TEXT_MAX} characters"))
    return errors


def _unknown_keys(obj: dict, path: str, known: tuple[str, ...], what: str) -> list[FieldError]:
    return [
        FieldError(
            f"{path}.{key}",
            f"{path}.{key} is not a {what} field (allowed: {', '.join(known)}) — a misspelt key would be "
            "ignored and the gate would not do what it says",
        )
        for key in obj
        if key not in known
    ]


# --- warnings: legal, but almost certainly not what the designer meant -------------------------------


def tool_approvals_warnings(
    hitl_config: object, task_blocks: dict[str, object], *, mode: str
) -> list[FieldError]:
    """Warnings (never errors) about the agent's toolApprovals and its llm tasks' blocks.

    ``task_blocks`` maps each llm task's block path (``workflows[0].tasks[2].toolApprovals``) to the
    block. Warned: an AUTO_APPROVE ``hitlConfig.timeoutPolicy`` that a tool pause would inherit (it is
    demoted to WAIT_INDEFINITELY, so it never auto-runs a gated tool), and, in strict mode, task-level
    settings the merge ignores or demotes (``exempt``, AUTO_APPROVE).
    """
    hitl = hitl_config if isinstance(hitl_config, dict) else {}
    agent_block = hitl.get("toolApprovals") if isinstance(hitl.get("toolApprovals"), dict) else None
    tasks = {path: block for path, block in task_blocks.items() if isinstance(block, dict)}
    warnings: list[FieldError] = []
    if hitl.get("timeoutPolicy") == AUTO_APPROVE:
        effective = {"hitlConfig.toolApprovals": agent_block} if agent_block is not None else {}
        effective |= {
            path: effective_tool_approvals(agent_block, block, mode=mode) for path, block in tasks.items()
        }
        warnings += [
            _inherited_auto_approve(path)
            for path, block in effective.items()
            if block is not None and _blank(block.get("timeoutPolicy"))
        ]
    if not is_replace_mode(mode):
        agent_policy = agent_block.get("timeoutPolicy") if agent_block is not None else None
        for path, block in tasks.items():
            warnings += _strict_mode_warnings(block, path, agent_policy)
    return warnings


def _inherited_auto_approve(path: str) -> FieldError:
    return FieldError(
        f"{path}.timeoutPolicy",
        f"hitlConfig.timeoutPolicy is AUTO_APPROVE, but {path} states no timeoutPolicy of its own: a tool "
        "pause never inherits AUTO_APPROVE (it is demoted to WAIT_INDEFINITELY, so a silent timeout never "
        f"runs a gated tool) — set {path}.timeoutPolicy to choose what a tool pause does on timeout",
    )


def _strict_mode_warnings(block: dict, path: str, agent_policy: object) -> list[FieldError]:
    warnings: list[FieldError] = []
    if block.get("exempt"):
        warnings.append(
            FieldError(
                f"{path}.exempt",
                f"{path}.exempt is ignored in strict mode (HITL_TASK_APPROVALS_MODE=strict): a task can only "
                "strengthen the agent's gate, and an exemption would ungate a tool — exempt it in "
                "hitlConfig.toolApprovals instead",
            )
        )
    if block.get("timeoutPolicy") == AUTO_APPROVE and agent_policy != AUTO_APPROVE:
        warnings.append(
            FieldError(
                f"{path}.timeoutPolicy",
                f"{path}.timeoutPolicy AUTO_APPROVE is demoted to WAIT_INDEFINITELY in strict mode "
                "(HITL_TASK_APPROVALS_MODE=strict) unless hitlConfig.toolApprovals.timeoutPolicy is "
                "AUTO_APPROVE itself",
            )
        )
    rules = block.get("rules")
    for index, rule in enumerate(rules if isinstance(rules, list) else []):
        if isinstance(rule, dict) and rule.get("timeoutPolicy") == AUTO_APPROVE:
            rule_path = f"{path}.rules[{index}].timeoutPolicy"
            warnings.append(
                FieldError(
                    rule_path,
                    f"{rule_path} AUTO_APPROVE is demoted to WAIT_INDEFINITELY in strict mode "
                    "(HITL_TASK_APPROVALS_MODE=strict): a task-level rule never auto-approves a gated tool",
                )
            )
    return warnings


def _non_empty_list(value: object) -> bool:
    return isinstance(value, list) and len(value) > 0


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _shown(value: object) -> str:
    return f"'{value}'" if isinstance(value, str) else json.dumps(value)
