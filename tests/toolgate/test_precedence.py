"""EDDI's Precedence table, row by row, and the task/agent resolver (docs/tool-gating.md, "Agent and
task: strict or replace") in both modes (strict: the task only strengthens; replace: the task replaces)."""

from __future__ import annotations

import pytest

from tests.toolgate.gate_fixtures import call, ids, toolset
from toolgate.gate import classify, gating_pattern, is_exempt
from toolgate.patterns import call_addresses
from toolgate.precedence import (
    UNDETERMINED,
    UNDETERMINED_REASON,
    clamp_max_auto_approvals,
    clamp_max_pauses,
    effective_tool_approvals,
    gate_active,
    on_no_progress,
)
from toolgate.tools import ToolCall


def strict(agent: dict | None, task: dict | None) -> dict | None:
    return effective_tool_approvals(agent, task, mode="strict")


def replace(agent: dict | None, task: dict | None) -> dict | None:
    return effective_tool_approvals(agent, task, mode="replace")


# --- Row: Exempt beats require ---------------------------------------------------------------------


def test_exempt_beats_require() -> None:
    config = {"requireApproval": ["mcp:*"], "exempt": ["mcp:read_*"]}
    result = classify([call("read_file"), call("delete_file")], config, toolset())
    assert ids(result.allowed) == ["call-read_file"]
    assert ids(result.gated) == ["call-delete_file"]


def test_exempt_beats_require_even_when_they_match_different_addresses() -> None:
    config = {"requireApproval": ["create_agent"], "exempt": ["http.post:*"]}
    result = classify([call("create_agent")], config, toolset())
    assert ids(result.allowed) == ["call-create_agent"] and result.gated == []


def test_is_exempt_and_gating_pattern_decide_on_addresses() -> None:
    addresses = call_addresses("mcp", "read_file", None)
    assert is_exempt({"exempt": ["read_*"]}, addresses)
    assert not is_exempt({}, addresses)
    assert gating_pattern({"requireApproval": ["x", "mcp:*", "*"]}, addresses) == "mcp:*"


# --- Row: Absent/empty requireApproval = gate off --------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        None,
        {},
        {"requireApproval": []},
        {"requireApproval": None},
        {"exempt": ["x"]},
        {"rules": [{"match": "*"}]},
    ],
)
def test_absent_or_empty_require_approval_means_gate_off(config: dict | None) -> None:
    calls = [call("delete_account"), call("create_agent"), call("read_file")]
    result = classify(calls, config, toolset())
    assert result.allowed == calls and result.gated == [] and result.gate_reasons == {}
    assert not gate_active(config)


def test_gate_is_active_with_any_require_pattern() -> None:
    assert gate_active({"requireApproval": ["delete_*"]})
    assert gate_active(UNDETERMINED)


# --- Row: Any match suffices -----------------------------------------------------------------------


def test_any_match_suffices() -> None:
    config = {"requireApproval": ["nothing_like_it", "delete_*", "mcp:*"]}
    calls = [call("delete_account"), call("delete_file"), call("calculator")]
    result = classify(calls, config, toolset())
    assert ids(result.gated) == ["call-delete_account", "call-delete_file"]
    assert ids(result.allowed) == ["call-calculator"]


def test_first_require_pattern_in_config_order_is_the_gate_reason() -> None:
    config = {"requireApproval": ["delete_*", "mcp:*"]}
    result = classify([call("delete_file")], config, toolset())
    assert result.gate_reasons == {"call-delete_file": "delete_*"}


def test_endpoint_pattern_gates_an_http_tool_by_what_it_calls() -> None:
    config = {"requireApproval": ["http.post:*", "http.delete:*"], "exempt": ["http.get:*"]}
    calls = [call("create_agent"), call("list_agents"), call("delete_agent"), call("deploy_agent")]
    result = classify(calls, config, toolset())
    assert ids(result.gated) == ["call-create_agent", "call-delete_agent", "call-deploy_agent"]
    assert result.gate_reasons["call-delete_agent"] == "http.delete:*"


def test_a_call_of_a_tool_the_agent_does_not_have_is_never_gated_it_cannot_run() -> None:
    """Nothing for a reviewer to approve: run_call answers NOT_EXECUTED "unknown tool" (a model's case or
    Unicode variant of a gated name, ``Transfer_Funds``, is such a call)."""
    result = classify([call("not_registered"), call("Delete_file")], {"requireApproval": ["*"]}, toolset())
    assert result.gated == [] and ids(result.allowed) == ["call-not_registered", "call-Delete_file"]


def test_calls_keep_their_batch_order() -> None:
    config = {"requireApproval": ["delete_*"]}
    calls = [
        call("delete_file", "3"),
        call("calculator", "1"),
        call("delete_account", "2"),
        call("remember", "0"),
    ]
    result = classify(calls, config, toolset())
    assert ids(result.gated) == ["3", "2"] and ids(result.allowed) == ["1", "0"]


# --- Every call carries an id before it is gated -------------------------------------------------


def test_a_call_must_have_an_id_before_it_is_gated() -> None:
    with pytest.raises(ValueError, match="has no id"):
        classify(
            [ToolCall(id="", name="delete_account")],
            {"requireApproval": ["*"]},
            toolset(),
        )


# --- Row: Task combines with agent per mode (strict) -----------------------------------------------


def test_task_can_only_strengthen_in_strict_mode() -> None:
    agent = {"requireApproval": ["mcp:*"], "exempt": ["mcp:read_*"], "timeoutPolicy": "AUTO_REJECT"}
    task = {
        "requireApproval": ["delete_*"],
        "exempt": ["mcp:*", "delete_*"],
        "timeoutPolicy": "AUTO_APPROVE",
        "maxAutoApprovalsPerTurn": 5,
    }
    merged = strict(agent, task)
    assert merged["requireApproval"] == ["mcp:*", "delete_*"]
    assert merged["exempt"] == ["mcp:read_*"]
    assert merged["timeoutPolicy"] == "WAIT_INDEFINITELY"
    assert merged["maxAutoApprovalsPerTurn"] == 2
    result = classify([call("delete_file"), call("read_file")], merged, toolset())
    assert ids(result.gated) == ["call-delete_file"]


def test_strict_require_approval_is_the_union_agent_first_without_repeats() -> None:
    merged = strict({"requireApproval": ["a", "b"]}, {"requireApproval": ["b", "c", "a"]})
    assert merged["requireApproval"] == ["a", "b", "c"]


def test_empty_task_require_approval_cannot_disable_the_agent_gate() -> None:
    merged = strict({"requireApproval": ["delete_*"]}, {"requireApproval": []})
    assert merged["requireApproval"] == ["delete_*"] and gate_active(merged)


def test_task_gate_applies_without_an_agent_block_in_strict_mode() -> None:
    merged = strict(None, {"requireApproval": ["delete_*"], "exempt": ["delete_file"]})
    assert merged == {"requireApproval": ["delete_*"]}


def test_strict_merge_of_two_empty_gates_stays_off() -> None:
    assert not gate_active(strict({"requireApproval": []}, {}))
    assert "requireApproval" not in strict({}, {})


def test_task_level_exempt_is_ignored_in_strict_mode() -> None:
    merged = strict({"requireApproval": ["*"]}, {"exempt": ["calculator"]})
    assert "exempt" not in merged
    result = classify([call("calculator")], merged, toolset())
    assert ids(result.gated) == ["call-calculator"]


@pytest.mark.parametrize(
    ("agent_policy", "task_policy", "effective"),
    [
        (None, "AUTO_APPROVE", "WAIT_INDEFINITELY"),
        ("AUTO_REJECT", "AUTO_APPROVE", "WAIT_INDEFINITELY"),
        ("AUTO_APPROVE", "AUTO_APPROVE", "AUTO_APPROVE"),
        ("AUTO_APPROVE", "ABORT", "ABORT"),
        ("AUTO_APPROVE", None, "AUTO_APPROVE"),
        ("ABORT", "AUTO_REJECT", "AUTO_REJECT"),
        ("ABORT", None, "ABORT"),
        (None, None, None),
    ],
)
def test_task_auto_approve_is_demoted_unless_the_agent_policy_grants_it(
    agent_policy: str | None, task_policy: str | None, effective: str | None
) -> None:
    agent = {"requireApproval": ["*"]} | ({"timeoutPolicy": agent_policy} if agent_policy else {})
    task = {"timeoutPolicy": task_policy} if task_policy else {}
    assert strict(agent, task).get("timeoutPolicy") == effective


def test_every_task_rule_auto_approve_is_demoted_in_strict_mode_whatever_the_agent_says() -> None:
    agent = {
        "requireApproval": ["*"],
        "timeoutPolicy": "AUTO_APPROVE",
        "rules": [{"match": "a", "timeoutPolicy": "AUTO_APPROVE"}],
    }
    task = {
        "rules": [{"match": "b", "timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": "PT1M"}, {"match": "c"}]
    }
    merged = strict(agent, task)
    assert merged["rules"] == [
        {"match": "b", "timeoutPolicy": "WAIT_INDEFINITELY", "approvalTimeout": "PT1M"},
        {"match": "c"},
        {"match": "a", "timeoutPolicy": "AUTO_APPROVE"},  # the agent's own rule keeps its policy
    ]
    assert task["rules"][0]["timeoutPolicy"] == "AUTO_APPROVE"  # the stored config is not mutated


@pytest.mark.parametrize(
    ("agent_max", "task_max", "effective"),
    [(None, None, None), (4, None, 4), (None, 5, 2), (None, 1, 1), (4, 3, 3), (1, 7, 1), (0, 2, 0)],
)
def test_max_auto_approvals_takes_the_minimum(
    agent_max: int | None, task_max: int | None, effective: int | None
) -> None:
    agent = {"requireApproval": ["*"]} | (
        {"maxAutoApprovalsPerTurn": agent_max} if agent_max is not None else {}
    )
    task = {"maxAutoApprovalsPerTurn": task_max} if task_max is not None else {}
    assert strict(agent, task).get("maxAutoApprovalsPerTurn") == effective


def test_strict_text_fields_are_the_tasks_when_stated_else_the_agents() -> None:
    agent = {
        "requireApproval": ["*"],
        "approvalTimeout": "PT30M",
        "onNoProgress": "ABORT",
        "pauseReason": "agent reason",
        "pendingMessage": "agent message",
        "inGroupTurns": "REJECT",
        "maxPausesPerTurn": 5,
    }
    task = {
        "approvalTimeout": "PT5M",
        "pauseReason": "  ",
        "pendingMessage": "task message",
        "maxPausesPerTurn": 1,
    }
    merged = strict(agent, task)
    assert merged["approvalTimeout"] == "PT5M"
    assert merged["onNoProgress"] == "ABORT"
    assert merged["pauseReason"] == "agent reason"  # blank states nothing
    assert merged["pendingMessage"] == "task message"
    assert merged["inGroupTurns"] == "REJECT"
    assert merged["maxPausesPerTurn"] == 1


def test_no_task_block_means_the_agent_block() -> None:
    agent = {"requireApproval": ["*"], "exempt": ["calculator"]}
    assert strict(agent, None) is agent
    assert replace(agent, None) is agent
    assert strict(None, None) is None


@pytest.mark.parametrize("mode", ["strict", "STRICT", "", "replaec", "anything"])
def test_every_mode_but_replace_is_strict(mode: str) -> None:
    merged = effective_tool_approvals({"requireApproval": ["a"]}, {"requireApproval": ["b"]}, mode=mode)
    assert merged["requireApproval"] == ["a", "b"]


# --- Row: Task combines with agent per mode (replace) ----------------------------------------------


@pytest.mark.parametrize("mode", ["replace", " Replace ", "REPLACE"])
def test_task_replaces_the_agent_block_wholesale_in_replace_mode(mode: str) -> None:
    agent = {"requireApproval": ["*"], "timeoutPolicy": "ABORT"}
    task = {"requireApproval": ["delete_*"], "exempt": ["delete_file"], "timeoutPolicy": "AUTO_APPROVE"}
    assert effective_tool_approvals(agent, task, mode=mode) is task
    result = classify([call("delete_file"), call("calculator")], task, toolset())
    assert result.gated == []


def test_empty_task_block_switches_the_gate_off_in_replace_mode_only() -> None:
    agent = {"requireApproval": ["*"]}
    assert not gate_active(replace(agent, {}))
    assert gate_active(strict(agent, {}))


# --- Fail closed ----------------------------------------------------------------------------------


def test_fail_closed_undetermined_config_gates_every_call() -> None:
    for mode in ("strict", "replace"):
        config = effective_tool_approvals(UNDETERMINED, {"exempt": ["*"], "requireApproval": []}, mode=mode)
        assert config is UNDETERMINED
        calls = [call("calculator"), call("read_file"), call("create_agent")]
        result = classify(calls, config, toolset())
        assert result.gated == calls
        assert set(result.gate_reasons.values()) == {"*"}
    assert UNDETERMINED["pauseReason"] == UNDETERMINED_REASON
    assert UNDETERMINED_REASON.startswith("The agent's tool-approval policy could not be read")


# --- Runtime clamps -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, 3), (1, 1), (10, 10), (0, 1), (-5, 1), (11, 10), (99, 10), ("4", 3), (True, 3), (2.5, 3)],
)
def test_max_pauses_per_turn_defaults_to_3_and_is_clamped_to_1_through_10(
    value: object, expected: int
) -> None:
    config = {} if value is None else {"maxPausesPerTurn": value}
    assert clamp_max_pauses(config) == expected
    assert clamp_max_pauses(None) == 3


@pytest.mark.parametrize(("value", "expected"), [(None, 2), (0, 0), (10, 10), (-1, 0), (11, 10), ("3", 2)])
def test_max_auto_approvals_defaults_to_2_and_is_clamped_to_0_through_10(
    value: object, expected: int
) -> None:
    config = {} if value is None else {"maxAutoApprovalsPerTurn": value}
    assert clamp_max_auto_approvals(config) == expected
    assert clamp_max_auto_approvals(None) == 2


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "WAIT_FOR_HUMAN"),
        ("", "WAIT_FOR_HUMAN"),
        ("WAIT_FOR_HUMAN", "WAIT_FOR_HUMAN"),
        ("AUTO_REJECT", "AUTO_REJECT"),
        ("ABORT", "ABORT"),
        ("abort", "WAIT_FOR_HUMAN"),
        ("EXPLODE", "WAIT_FOR_HUMAN"),
    ],
)
def test_on_no_progress_defaults_to_wait_for_human(value: object, expected: str) -> None:
    assert on_no_progress({"onNoProgress": value}) == expected
    assert on_no_progress(None) == "WAIT_FOR_HUMAN"
