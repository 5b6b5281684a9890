"""Per-tool approval rules (docs/tool-gating.md, "Rules: friction per tool"): most specific
per call, strictest per batch, fields fall back one by one, a rule never gates or ungates."""

from __future__ import annotations

import pytest

from tests.toolgate.gate_fixtures import call, ids, toolset
from toolgate.gate import classify
from toolgate.precedence import effective_tool_approvals, effective_tool_timeout
from toolgate.rules import governing_rule, resolve_rules, rule_field, rules_by_specificity, specificity

GATE_ALL_MUTATIONS = ["http.post:*", "http.put:*", "http.patch:*", "http.delete:*"]


def config_with(*rules: dict, **scalars: object) -> dict:
    return {"requireApproval": GATE_ALL_MUTATIONS + ["delete_*", "mcp:*"], "rules": list(rules), **scalars}


# --- Per call, most specific wins ------------------------------------------------------------------


def test_most_specific_rule_per_call() -> None:
    broad = {"match": "http.post:*", "timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT5M"}
    exact = {"match": "http.post:/agentstore/agents", "timeoutPolicy": "WAIT_INDEFINITELY"}
    for rules in ([broad, exact], [exact, broad]):  # whatever order they are listed in
        resolution = resolve_rules(
            config_with(*rules), [call("create_agent"), call("deploy_agent")], toolset()
        )
        assert resolution.per_call == {"call-create_agent": exact, "call-deploy_agent": broad}


def test_fewer_wildcards_beat_a_longer_pattern() -> None:
    rules = [{"match": "http.post:/administration/*/deploy/*"}, {"match": "deploy_agent"}]
    assert [r["match"] for r in rules_by_specificity({"rules": rules})] == ["deploy_agent", rules[0]["match"]]
    assert specificity("deploy_agent") > specificity("http.post:/administration/*/deploy/*")


def test_among_equal_wildcards_the_longer_pattern_wins() -> None:
    rules = [{"match": "delete_*"}, {"match": "delete_acc*"}]
    resolution = resolve_rules(config_with(*rules), [call("delete_account")], toolset())
    assert resolution.per_call["call-delete_account"] == rules[1]


def test_equally_specific_rules_keep_list_order() -> None:
    first, second = (
        {"match": "delete_*", "pauseReason": "first"},
        {"match": "*account", "pauseReason": "second"},
    )
    resolution = resolve_rules(config_with(first, second), [call("delete_account")], toolset())
    assert resolution.per_call["call-delete_account"] is first
    resolution = resolve_rules(config_with(second, first), [call("delete_account")], toolset())
    assert resolution.per_call["call-delete_account"] is second


def test_task_rules_win_specificity_ties_in_a_strict_merge() -> None:
    agent = config_with({"match": "delete_*", "pauseReason": "agent"})
    task = {"rules": [{"match": "delete_*", "pauseReason": "task"}]}
    merged = effective_tool_approvals(agent, task, mode="strict")
    resolution = resolve_rules(merged, [call("delete_account")], toolset())
    assert resolution.per_call["call-delete_account"]["pauseReason"] == "task"


def test_a_rule_matches_any_address_of_the_call() -> None:
    by_source = {"match": "mcp:delete_*"}
    by_endpoint = {"match": "http.delete:/agentstore/agents/{id}"}
    resolution = resolve_rules(
        config_with(by_source, by_endpoint), [call("delete_file"), call("delete_agent")], toolset()
    )
    assert resolution.per_call == {"call-delete_file": by_source, "call-delete_agent": by_endpoint}


def test_call_without_a_matching_rule_has_none() -> None:
    resolution = resolve_rules(config_with({"match": "mcp:*"}), [call("delete_account")], toolset())
    assert resolution.per_call == {"call-delete_account": None}
    assert resolution.governing is None and resolution.matched_patterns == []


def test_rules_without_a_usable_match_are_skipped() -> None:
    rules = [{"match": ""}, {"match": "  "}, {"pauseReason": "no match"}, None, "x", {"match": "delete_*"}]
    resolution = resolve_rules(config_with(*rules), [call("delete_account")], toolset())
    assert resolution.per_call["call-delete_account"] == {"match": "delete_*"}


def test_no_config_or_no_rules_resolve_to_nothing() -> None:
    for config in (None, {}, {"requireApproval": ["*"]}):
        resolution = resolve_rules(config, [call("delete_account")], toolset())
        assert resolution.per_call == {"call-delete_account": None} and resolution.governing is None


# --- Per batch, strictest wins ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lenient", "strict"),
    [
        ("AUTO_REJECT", "WAIT_INDEFINITELY"),
        ("ABORT", "WAIT_INDEFINITELY"),
        ("AUTO_REJECT", "ABORT"),
        ("AUTO_APPROVE", "AUTO_REJECT"),
        (None, "AUTO_APPROVE"),
    ],
)
def test_strictest_rule_governs_the_batch(lenient: str | None, strict: str) -> None:
    lenient_rule = {"match": "http.post:/agentstore/agents"} | ({"timeoutPolicy": lenient} if lenient else {})
    strict_rule = {"match": "mcp:*", "timeoutPolicy": strict}
    for gated in ([call("create_agent"), call("delete_file")], [call("delete_file"), call("create_agent")]):
        resolution = resolve_rules(config_with(lenient_rule, strict_rule), gated, toolset())
        assert resolution.governing is strict_rule


def test_bundling_a_lenient_call_never_softens_a_stricter_rule() -> None:
    strict_rule = {"match": "delete_account", "timeoutPolicy": "WAIT_INDEFINITELY"}
    lenient_rule = {"match": "mcp:*", "timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": "PT1M"}
    gated = [call("delete_file"), call("delete_account")]
    resolution = resolve_rules(config_with(lenient_rule, strict_rule), gated, toolset())
    timeout = effective_tool_timeout(resolution.governing, config_with(), None)
    assert timeout["timeoutPolicy"] == "WAIT_INDEFINITELY"


def test_strictness_ties_break_on_specificity() -> None:
    broad = {"match": "mcp:*", "timeoutPolicy": "ABORT"}
    exact = {"match": "delete_account", "timeoutPolicy": "ABORT"}
    resolution = resolve_rules(
        config_with(broad, exact), [call("delete_file"), call("delete_account")], toolset()
    )
    assert resolution.governing is exact


def test_full_tie_goes_to_the_first_in_gated_call_order() -> None:
    first = {"match": "mcp:delete_f*", "timeoutPolicy": "ABORT"}
    second = {"match": "delete_accou*", "timeoutPolicy": "ABORT"}
    assert specificity(first["match"]) == specificity(second["match"])
    for gated, expected in (
        ([call("delete_file"), call("delete_account")], first),
        ([call("delete_account"), call("delete_file")], second),
    ):
        assert resolve_rules(config_with(first, second), gated, toolset()).governing is expected


def test_a_rule_stating_no_policy_governs_only_when_nothing_stricter_matched() -> None:
    quiet = {"match": "delete_account", "pauseReason": "Deleting an account"}
    assert governing_rule([None, quiet, None]) is quiet
    loud = {"match": "mcp:*", "timeoutPolicy": "AUTO_APPROVE"}
    assert governing_rule([quiet, loud]) is loud
    assert governing_rule([]) is None and governing_rule([None]) is None


def test_matched_patterns_are_distinct_in_gated_call_order() -> None:
    mcp, deletes = {"match": "mcp:*"}, {"match": "delete_account"}
    gated = [call("delete_file", "1"), call("delete_account", "2"), call("read_file", "3")]
    resolution = resolve_rules(config_with(mcp, deletes), gated, toolset())
    assert resolution.matched_patterns == ["mcp:*", "delete_account"]


# --- Fields fall back one by one -------------------------------------------------------------------


def test_rule_fields_fall_back_one_by_one() -> None:
    """``rules.rule_field`` applies the fallback for the text fields (pauseReason, pendingMessage);
    ``precedence.effective_tool_timeout`` applies it for timeoutPolicy and approvalTimeout, with
    hitlConfig as a further step."""
    tool_approvals = config_with(
        timeoutPolicy="AUTO_REJECT",
        approvalTimeout="PT30M",
        pauseReason="Approval required for {toolNames}",
        pendingMessage="Waiting for {toolNames}",
    )
    rule = {"match": "delete_account", "pauseReason": "Deleting an account — check the customer id"}
    assert rule_field(rule, tool_approvals, "pauseReason") == "Deleting an account — check the customer id"
    assert rule_field(rule, tool_approvals, "pendingMessage") == "Waiting for {toolNames}"
    assert rule_field(rule, tool_approvals, "timeoutPolicy") == "AUTO_REJECT"
    assert effective_tool_timeout(rule, tool_approvals, None) == {
        "timeoutPolicy": "AUTO_REJECT",
        "approvalTimeout": "PT30M",
    }
    only_clock = {"match": "delete_account", "approvalTimeout": "PT1M"}
    assert effective_tool_timeout(only_clock, tool_approvals, None) == {
        "timeoutPolicy": "AUTO_REJECT",
        "approvalTimeout": "PT1M",
    }


def test_blank_rule_field_falls_back_and_missing_everywhere_is_none() -> None:
    assert rule_field({"match": "x", "pauseReason": "  "}, {"pauseReason": "outer"}, "pauseReason") == "outer"
    assert rule_field(None, {"pauseReason": "outer"}, "pauseReason") == "outer"
    assert rule_field({"match": "x"}, None, "pendingMessage") is None


# --- A rule never gates or ungates -----------------------------------------------------------------


def test_a_rule_never_gates_or_ungates() -> None:
    config = {
        "requireApproval": ["delete_*"],
        "exempt": ["delete_file"],
        "rules": [
            {"match": "calculator", "timeoutPolicy": "WAIT_INDEFINITELY"},  # would gate: it does not
            {"match": "delete_account", "timeoutPolicy": "AUTO_APPROVE"},  # would ungate: it does not
            {"match": "delete_*", "timeoutPolicy": "ABORT"},
        ],
    }
    calls = [call("calculator"), call("delete_account"), call("delete_file")]
    result = classify(calls, config, toolset())
    without_rules = classify(calls, {k: v for k, v in config.items() if k != "rules"}, toolset())
    assert ids(result.gated) == ids(without_rules.gated) == ["call-delete_account"]
    assert ids(result.allowed) == ["call-calculator", "call-delete_file"]
    resolution = resolve_rules(config, result.gated, toolset())
    assert list(resolution.per_call) == ["call-delete_account"]  # only gated calls are tuned


def test_rules_alone_never_switch_the_gate_on() -> None:
    config = {"rules": [{"match": "*", "timeoutPolicy": "WAIT_INDEFINITELY"}]}
    result = classify([call("delete_account")], config, toolset())
    assert result.gated == []
