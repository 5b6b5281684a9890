"""The gate: which calls of one model response may run now and which must wait for a human.

Only ``requireApproval`` and ``exempt`` decide; rules (toolgate.rules) tune a gated call's friction
and never gate or ungate one. A call id clears nothing: an approval is consumed by the one execution
of the approved call when the turn resumes (toolgate.resume), so every call the model issues is gated
on what it asks for, whatever its id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from toolgate.patterns import call_addresses, first_match
from toolgate.precedence import gate_active
from toolgate.tools import ToolCall, ToolSet


@dataclass
class GateResult:
    allowed: list[ToolCall] = field(default_factory=list)
    gated: list[ToolCall] = field(default_factory=list)
    # call id -> the requireApproval pattern that gated it
    gate_reasons: dict[str, str] = field(default_factory=dict)


def classify(calls: list[ToolCall], config: dict | None, toolset: ToolSet) -> GateResult:
    """Split ``calls`` (in batch order) into those that run now and those that need approval.

    Every call must already carry an id of its own (toolgate.call_ids.distinct_call_ids).
    """
    result = GateResult()
    if not gate_active(config):
        result.allowed = list(calls)
        return result
    assert config is not None  # nosec B101  # type narrowing; the check above already refused it
    for call in calls:
        if not call.id:  # a real check, not an assert: ``python -O`` would drop it (bandit B101)
            raise ValueError(f"tool call {call.name!r} has no id: give it one before gating")
        pattern = None
        if call.name is not None:
            addresses = addresses_of(call, toolset)
            if not is_exempt(config, addresses):
                pattern = gating_pattern(config, addresses)
        if pattern is None:
            result.allowed.append(call)
        else:
            result.gated.append(call)
            result.gate_reasons[call.id] = pattern
    return result


def addresses_of(call: ToolCall, toolset: ToolSet) -> list[str]:
    """The addresses patterns test for this call, from what the toolset knows of its tool."""
    return call_addresses(toolset.source_of(call.name), call.name, toolset.endpoint_of(call.name))


def is_exempt(config: dict, addresses: list[str]) -> bool:
    """Exempt beats require: a call matching any exempt pattern runs, whatever requireApproval says."""
    return first_match(_patterns(config.get("exempt")), addresses) is not None


def gating_pattern(config: dict, addresses: list[str]) -> str | None:
    """Any match suffices: the first requireApproval pattern (config order, then address order) that
    matches the call gates it and becomes its gate reason; no match means the call runs."""
    return first_match(_patterns(config.get("requireApproval")), addresses)


def _patterns(value: object) -> list[str]:
    return [pattern for pattern in value if isinstance(pattern, str)] if isinstance(value, list) else []
