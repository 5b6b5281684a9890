"""Per-tool approval rules: which rule tunes each gated call, and which one governs the batch.

A rule tunes friction (timeout policy and duration, reason, pending message); it never gates or
ungates — only the gated calls are resolved here, and nothing here changes which calls are gated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolgate.gate.classification import addresses_of
from toolgate.gate.patterns import first_match
from toolgate.gate.tools import ToolCall, ToolSet

# The least human authority on timeout is the strictest: waiting beats cancelling beats rejecting
# beats approving beats saying nothing.
STRICTNESS = {"AUTO_APPROVE": 1, "AUTO_REJECT": 2, "ABORT": 3, "WAIT_INDEFINITELY": 4}


@dataclass
class RuleResolution:
    # gated call id -> the rule that tunes it (None: no rule matches)
    per_call: dict[str, dict | None] = field(default_factory=dict)
    governing: dict | None = None
    # distinct matched rule patterns, in gated-call order (one metric increment each per pause)
    matched_patterns: list[str] = field(default_factory=list)
    # every rule whose pattern matches a gated call, not only the most specific one, each once: any of
    # them may forbid self-approval (a more specific rule that only rewords a reason never re-allows it)
    matching_rules: list[dict] = field(default_factory=list)


def resolve_rules(config: dict | None, gated: list[ToolCall], toolset: ToolSet) -> RuleResolution:
    """The rule of each gated call (most specific wins) and the batch's governing rule (strictest wins)."""
    resolution = RuleResolution()
    rules = rules_by_specificity(config)
    for call in gated:
        matching = _matching_rules(rules, addresses_of(call, toolset)) if call.name is not None else []
        rule = matching[0] if matching else None
        resolution.per_call[call.id] = rule
        resolution.matching_rules += [
            m for m in matching if all(m is not seen for seen in resolution.matching_rules)
        ]
        if rule is not None and rule["match"] not in resolution.matched_patterns:
            resolution.matched_patterns.append(rule["match"])
    resolution.governing = governing_rule([resolution.per_call[call.id] for call in gated])
    return resolution


def _matching_rules(rules: list[dict], addresses: list[str]) -> list[dict]:
    """The rules matching any of a call's addresses, in specificity order: per call, the first wins."""
    return [rule for rule in rules if first_match([rule["match"]], addresses) is not None]


def rules_by_specificity(config: dict | None) -> list[dict]:
    """Most specific first: fewer wildcards, then a longer pattern; equal ones keep their list order
    (in a strict merge the task's rules come first, so they win such ties). Rules without a usable
    ``match`` are skipped."""
    rules = config.get("rules") if isinstance(config, dict) else None
    usable = [
        rule
        for rule in (rules if isinstance(rules, list) else [])
        if isinstance(rule, dict) and isinstance(rule.get("match"), str) and rule["match"].strip()
    ]
    return sorted(usable, key=lambda rule: specificity(rule["match"]), reverse=True)


def specificity(pattern: str) -> tuple[int, int]:
    """Fewer wildcards is more specific; among equals, the longer pattern is."""
    return (-pattern.count("*"), len(pattern))


def strictness(rule: dict) -> int:
    """How little authority a rule's timeout policy leaves to the clock (0: it states no policy)."""
    return STRICTNESS.get(rule.get("timeoutPolicy"), 0)


def governing_rule(matched: list[dict | None]) -> dict | None:
    """Strictest wins, so bundling a lenient call into a batch never softens a stricter rule; ties go
    to the more specific rule, then to the first in gated-call order."""
    governing: dict | None = None
    for rule in matched:
        if rule is None:
            continue
        if governing is None or _rank(rule) > _rank(governing):
            governing = rule
    return governing


def _rank(rule: dict) -> tuple[int, tuple[int, int]]:
    return (strictness(rule), specificity(rule["match"]))


def rule_field(rule: dict | None, tool_approvals: dict | None, name: str) -> Any:
    """A rule's field, falling back one by one to the toolApprovals scalar of the same name.

    A rule that only sets ``pauseReason`` keeps the configured timeout policy and message. Blank text
    states nothing and falls back. The timeout fields go one step further, to hitlConfig, through
    ``toolgate.gate.precedence.effective_tool_timeout``.
    """
    for source in (rule, tool_approvals):
        if isinstance(source, dict):
            value = source.get(name)
            if value is not None and not (isinstance(value, str) and not value.strip()):
                return value
    return None
