"""The gate: which calls of one model response may run now and which must wait for a human.

Only ``requireApproval`` and ``exempt`` decide; rules (toolgate.gate.rules) tune a gated call's friction
and never gate or ungate one. A call id clears nothing: an approval is consumed by the one execution
of the approved call when the turn resumes (toolgate.runtime.tool_continuation), so every call the model issues is gated
on what it asks for, whatever its id.

The gate judges the request as it will be sent, not only the template: an http tool's call is resolved
first, and a requireApproval pattern that matches its method and path
(``toolgate.gate.patterns.request_addresses``, compared case- and Unicode-insensitively) gates it; a call
that runs ungated has every request it sends judged again just before it leaves
(``unapproved_request_check``), so one that would reach a gated endpoint is never sent.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolgate.gate.patterns import call_addresses, first_match, first_match_folded, request_addresses
from toolgate.gate.precedence import gate_active
from toolgate.gate.tools import ToolCall, ToolContext, ToolSet
from toolgate.outbound.http_errors import HttpCallError

if TYPE_CHECKING:
    from toolgate.outbound.http_requests import BuiltRequest

logger = logging.getLogger(__name__)


@dataclass
class GateResult:
    allowed: list[ToolCall] = field(default_factory=list)
    gated: list[ToolCall] = field(default_factory=list)
    # call id -> the requireApproval pattern that gated it
    gate_reasons: dict[str, str] = field(default_factory=dict)


def classify(
    calls: list[ToolCall], config: dict | None, toolset: ToolSet, *, context: ToolContext | None = None
) -> GateResult:
    """Split ``calls`` (in batch order) into those that run now and those that need approval.

    Every call must already carry an id of its own (toolgate.runtime.call_ids.distinct_call_ids). With
    ``context`` an http tool's request is resolved and judged as it will be sent (module rules). A call
    of a tool the toolset does not have is never gated: it cannot run (``run_call`` answers that the tool
    is unknown), so there is nothing for a reviewer to approve.
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
        if call.name is not None and call.name in toolset.tools:  # an unknown tool never runs: no pause
            addresses = addresses_of(call, toolset)
            if not is_exempt(config, addresses):
                pattern = gating_pattern(config, addresses) or sent_gating_pattern(
                    config, resolved_request(call, toolset, context)
                )
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


def sent_gating_pattern(config: dict, built: BuiltRequest | None) -> str | None:
    """The first requireApproval pattern that matches the request as it will be sent (module rules)."""
    if built is None:
        return None
    try:
        path = built.sent_path()
    except HttpCallError:
        return None  # httpx cannot make it, so it is never sent
    addresses = request_addresses(built.method, path, built.base_path)
    return first_match_folded(_patterns(config.get("requireApproval")), addresses)


def resolved_request(call: ToolCall, toolset: ToolSet, context: ToolContext | None) -> BuiltRequest | None:
    """The request an http tool's call would send now (None: not an http tool, or it cannot be built:
    then it cannot be sent either, and ``unapproved_request_check`` judges whatever is built later)."""
    tool = toolset.tools.get(call.name) if call.name is not None else None
    if tool is None or tool.resolve is None or context is None:
        return None
    try:
        arguments = json.loads(call.arguments or "{}")
        return tool.resolve(arguments if isinstance(arguments, dict) else {}, context)
    except Exception as exc:  # the request is judged again when it is built to be sent
        logger.info("gate: the request of %s could not be resolved (%s)", call.name, type(exc).__name__)
        return None


def unapproved_request_check(config: dict | None, call: ToolCall, toolset: ToolSet) -> Any:
    """For a call that runs without approval: a check of each request it is about to send that refuses one
    the policy gates, judged on the request as sent (None when the gate is off or the call is exempt)."""
    if not gate_active(config) or call.name is None:
        return None
    assert config is not None  # nosec B101  # type narrowing; gate_active refused None
    if is_exempt(config, addresses_of(call, toolset)):
        return None

    def check(built: BuiltRequest) -> dict[str, Any] | None:
        pattern = sent_gating_pattern(config, built)
        if pattern is None:
            return None
        view = built.view()
        return {
            "status": "NOT_EXECUTED",
            "reason": f"the request it would send ({view.method} {view.uri}) needs approval ({pattern}); "
            "it was not sent",
        }

    return check


def _patterns(value: object) -> list[str]:
    return [pattern for pattern in value if isinstance(pattern, str)] if isinstance(value, list) else []
