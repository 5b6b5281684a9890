"""Conditions of behaviour rules, evaluated against conversation memory.

Each condition is ``{"type": …, "configs": {…}, "conditions": [...]}``. Rules:

- ``inputmatcher``: every pattern of ``configs.expressions`` matches one expression of a step.
- ``actionmatcher``: every action of ``configs.actions`` (comma string or list) is among a step's actions.
- For both, ``configs.occurrence`` picks the steps: ``currentStep`` (default), ``lastStep``,
  ``anyStep`` (some step, earlier or current, satisfies it on its own) and ``never`` (no step so far
  does). The current step's actions are those added so far, including ``CONVERSATION_START``.
- ``propertymatcher``: the conversation property ``configs.name`` exists and, when ``configs.value``
  is given, equals it compared as text.
- ``contextmatcher``: the step context's ``configs.contextKey`` compared by ``configs.contextType``:
  ``string`` (default) equals ``contextValue``; ``object`` has ``objectValue`` at the dotted
  ``objectKeyPath``; ``expressions`` parses as expressions matching ``configs.expressions``.
- ``negation``: true when NOT all of its ``conditions`` hold.
- ``connector``: ``configs.operator`` ``AND`` (default) or ``OR`` over its ``conditions``.
- Anything unknown or malformed is false: a rule fails closed rather than firing by accident.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from conversations.pipeline.conversation_memory import ConversationMemory, Step
from conversations.pipeline.expressions import (
    Expression,
    ExpressionSyntaxError,
    all_patterns_match,
    parse_expressions,
)
from toolgate.outbound import MISSING, lookup_path

Condition = dict[str, Any]


def all_conditions_hold(conditions: list[Condition], memory: ConversationMemory) -> bool:
    """True when every condition holds; an empty list holds."""
    return all(condition_holds(condition, memory) for condition in conditions)


def condition_holds(condition: Condition, memory: ConversationMemory) -> bool:
    evaluate = _EVALUATORS.get(str(condition.get("type", "")).lower())
    if evaluate is None:
        return False
    return evaluate(condition, memory)


def step_expressions(step: Step) -> list[Expression]:
    """The parsed expressions a step recorded in ``data["expressions:parsed"]``."""
    parsed = step.data.get("expressions:parsed") or []
    if isinstance(parsed, str):
        parsed = [parsed]
    result: list[Expression] = []
    for text in parsed:
        result.extend(_safe_parse(str(text)))
    return result


def _inputmatcher(condition: Condition, memory: ConversationMemory) -> bool:
    configs = _configs(condition)
    patterns = _safe_parse(str(configs.get("expressions", "")))
    if not patterns:
        return False
    return _by_occurrence(configs, memory, lambda step: all_patterns_match(patterns, step_expressions(step)))


def _actionmatcher(condition: Condition, memory: ConversationMemory) -> bool:
    configs = _configs(condition)
    wanted = _as_list(configs.get("actions"))
    if not wanted:
        return False
    return _by_occurrence(configs, memory, lambda step: all(action in step.actions for action in wanted))


def _propertymatcher(condition: Condition, memory: ConversationMemory) -> bool:
    configs = _configs(condition)
    name = configs.get("name")
    if not name or name not in memory.properties:
        return False
    if "value" not in configs:
        return True
    return _as_text(memory.properties[name]) == _as_text(configs["value"])


def _contextmatcher(condition: Condition, memory: ConversationMemory) -> bool:
    configs = _configs(condition)
    key = configs.get("contextKey")
    if not key or key not in memory.current.context:
        return False
    value = memory.current.context[key]
    context_type = str(configs.get("contextType") or "string").lower()
    if context_type == "string":
        return _as_text(value) == _as_text(configs.get("contextValue"))
    if context_type == "object":
        found = _dotted(value, str(configs.get("objectKeyPath", "")))
        return found is not MISSING and _as_text(found) == _as_text(configs.get("objectValue"))
    if context_type == "expressions":
        patterns = _safe_parse(str(configs.get("expressions", "")))
        return bool(patterns) and all_patterns_match(patterns, _safe_parse(_as_text(value)))
    return False


def _negation(condition: Condition, memory: ConversationMemory) -> bool:
    return not all_conditions_hold(_nested(condition), memory)


def _connector(condition: Condition, memory: ConversationMemory) -> bool:
    nested = _nested(condition)
    operator = str(_configs(condition).get("operator") or "AND").upper()
    if operator == "OR":
        return any(condition_holds(c, memory) for c in nested)
    if operator == "AND":
        return all_conditions_hold(nested, memory)
    return False


_EVALUATORS: dict[str, Callable[[Condition, ConversationMemory], bool]] = {
    "inputmatcher": _inputmatcher,
    "actionmatcher": _actionmatcher,
    "propertymatcher": _propertymatcher,
    "contextmatcher": _contextmatcher,
    "negation": _negation,
    "connector": _connector,
}


def _by_occurrence(
    configs: dict[str, Any], memory: ConversationMemory, holds: Callable[[Step], bool]
) -> bool:
    occurrence = str(configs.get("occurrence") or "currentStep").lower()
    if occurrence == "currentstep":
        return holds(memory.current)
    if occurrence == "laststep":
        return memory.last is not None and holds(memory.last)
    every_step = [*memory.every_previous(), memory.current]
    if occurrence == "anystep":
        return any(holds(step) for step in every_step)
    if occurrence == "never":
        return not any(holds(step) for step in every_step)
    return False


def _dotted(value: Any, path: str) -> Any:
    """The value at a dotted ``path`` (``a.0.b``; empty parts skipped), ``MISSING`` when absent."""
    return lookup_path(value, [part for part in path.split(".") if part])


def _configs(condition: Condition) -> dict[str, Any]:
    configs = condition.get("configs")
    return configs if isinstance(configs, dict) else {}


def _nested(condition: Condition) -> list[Condition]:
    nested = condition.get("conditions", _configs(condition).get("conditions"))
    return [c for c in nested if isinstance(c, dict)] if isinstance(nested, list) else []


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list):
        return [str(part).strip() for part in value if str(part).strip()]
    return []


def _as_text(value: Any) -> str:
    """Text form for equality checks: strings as themselves, other JSON values as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _safe_parse(text: str) -> list[Expression]:
    try:
        return parse_expressions(text)
    except ExpressionSyntaxError:
        return []
