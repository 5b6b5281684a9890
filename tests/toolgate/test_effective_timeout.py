"""The effective timeout policy of a tool pause (docs/tool-gating.md,
"Effective timeout policy"): rule verbatim, then toolApprovals verbatim, then hitlConfig with AUTO_APPROVE demoted, then
WAIT_INDEFINITELY; the duration walks the same chain on its own."""

from __future__ import annotations

import pytest

from toolgate.precedence import effective_tool_timeout

POLICIES = ("AUTO_APPROVE", "AUTO_REJECT", "ABORT", "WAIT_INDEFINITELY")


def with_policy(policy: str | None, timeout: str | None = None) -> dict:
    config: dict = {}
    if policy is not None:
        config["timeoutPolicy"] = policy
    if timeout is not None:
        config["approvalTimeout"] = timeout
    return config


# (rule policy, toolApprovals policy, hitlConfig policy) -> effective policy
POLICY_TABLE = [
    # 1. the governing rule's policy wins, verbatim (AUTO_APPROVE included)
    ("AUTO_APPROVE", "AUTO_REJECT", "ABORT", "AUTO_APPROVE"),
    ("WAIT_INDEFINITELY", "AUTO_APPROVE", "AUTO_APPROVE", "WAIT_INDEFINITELY"),
    ("ABORT", None, None, "ABORT"),
    ("AUTO_REJECT", None, "AUTO_APPROVE", "AUTO_REJECT"),
    # 2. else toolApprovals' own policy, verbatim (an explicit AUTO_APPROVE is an opt-in)
    (None, "AUTO_APPROVE", None, "AUTO_APPROVE"),
    (None, "AUTO_APPROVE", "ABORT", "AUTO_APPROVE"),
    (None, "AUTO_REJECT", "AUTO_APPROVE", "AUTO_REJECT"),
    (None, "WAIT_INDEFINITELY", "ABORT", "WAIT_INDEFINITELY"),
    # 3. else hitlConfig's, but an inherited AUTO_APPROVE is demoted
    (None, None, "AUTO_APPROVE", "WAIT_INDEFINITELY"),
    (None, None, "AUTO_REJECT", "AUTO_REJECT"),
    (None, None, "ABORT", "ABORT"),
    (None, None, "WAIT_INDEFINITELY", "WAIT_INDEFINITELY"),
    # 4. nothing anywhere
    (None, None, None, "WAIT_INDEFINITELY"),
]


@pytest.mark.parametrize(("rule", "tool_approvals", "hitl_config", "effective"), POLICY_TABLE)
def test_effective_policy_follows_the_documented_order(
    rule: str | None, tool_approvals: str | None, hitl_config: str | None, effective: str
) -> None:
    result = effective_tool_timeout(with_policy(rule), with_policy(tool_approvals), with_policy(hitl_config))
    assert result["timeoutPolicy"] == effective


# (rule duration, toolApprovals duration, hitlConfig duration) -> effective duration
DURATION_TABLE = [
    ("PT1M", "PT2M", "PT3M", "PT1M"),
    (None, "PT2M", "PT3M", "PT2M"),
    (None, None, "PT3M", "PT3M"),
    ("  ", "", "PT3M", "PT3M"),  # blank states nothing
    (None, None, None, None),
]


@pytest.mark.parametrize(("rule", "tool_approvals", "hitl_config", "effective"), DURATION_TABLE)
def test_duration_walks_the_same_chain_independently(
    rule: str | None, tool_approvals: str | None, hitl_config: str | None, effective: str | None
) -> None:
    result = effective_tool_timeout(
        with_policy(None, rule), with_policy(None, tool_approvals), with_policy(None, hitl_config)
    )
    assert result["approvalTimeout"] == effective


def test_inherited_auto_approve_never_auto_runs_a_gated_tool() -> None:
    hitl_config = {"timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": "PT10M"}
    result = effective_tool_timeout(None, {"requireApproval": ["*"]}, hitl_config)
    assert result == {"timeoutPolicy": "WAIT_INDEFINITELY", "approvalTimeout": "PT10M"}
    result = effective_tool_timeout({"match": "x", "pauseReason": "r"}, None, hitl_config)
    assert result["timeoutPolicy"] == "WAIT_INDEFINITELY"


def test_a_rule_stating_only_a_policy_still_inherits_a_clock() -> None:
    rule = {"match": "http.post:*", "timeoutPolicy": "AUTO_REJECT"}
    result = effective_tool_timeout(rule, {"requireApproval": ["*"]}, {"approvalTimeout": "PT30M"})
    assert result == {"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT30M"}


def test_tool_approvals_policy_falls_back_to_the_outer_duration() -> None:
    result = effective_tool_timeout(None, {"timeoutPolicy": "ABORT"}, {"approvalTimeout": "PT2H"})
    assert result == {"timeoutPolicy": "ABORT", "approvalTimeout": "PT2H"}


def test_nothing_configured_waits_indefinitely() -> None:
    assert effective_tool_timeout(None, None, None) == {
        "timeoutPolicy": "WAIT_INDEFINITELY",
        "approvalTimeout": None,
    }


@pytest.mark.parametrize("policy", POLICIES)
def test_explicit_rule_and_tool_policies_are_honoured_verbatim(policy: str) -> None:
    assert effective_tool_timeout(with_policy(policy), None, None)["timeoutPolicy"] == policy
    assert effective_tool_timeout(None, with_policy(policy), None)["timeoutPolicy"] == policy
