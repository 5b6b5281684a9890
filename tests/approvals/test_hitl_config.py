"""Save-time validation of an agent's hitlConfig: its rules and exact messages."""

from __future__ import annotations

import pytest

from approvals.hitl_config import (
    FINITE_POLICIES,
    PAUSE_REASON_MAX,
    TIMEOUT_POLICIES,
    validate_hitl_config,
)
from common.field_errors import FieldError

FINITE_NEEDS_TIMEOUT = (
    "hitlConfig: a finite timeoutPolicy (AUTO_APPROVE/AUTO_REJECT/ABORT) requires an approvalTimeout "
    '(ISO-8601 duration, e.g. "PT30M") — without it the policy never fires'
)
PAUSE_REASON_TOO_LONG = (
    "hitlConfig.pauseReason exceeds the maximum length of 500 characters — "
    "it is approver-facing summary text, not documentation"
)


def not_iso(value: str) -> str:
    return (
        f"hitlConfig.approvalTimeout '{value}' is not a valid ISO-8601 duration "
        '(expected e.g. "PT30S", "PT15M", "PT2H")'
    )


def not_positive(value: str) -> str:
    return f"hitlConfig.approvalTimeout must be a positive duration, got '{value}'"


def test_the_documented_example_is_valid() -> None:
    config = {
        "approvalTimeout": "PT15M",
        "timeoutPolicy": "AUTO_REJECT",
        "pauseReason": "Account deletion requires manager sign-off",
    }
    assert validate_hitl_config(config) == []


def test_no_hitl_config_is_valid() -> None:
    assert validate_hitl_config(None) == []
    assert validate_hitl_config({}) == []


def test_constants_name_the_policies() -> None:
    assert TIMEOUT_POLICIES == ("WAIT_INDEFINITELY", "AUTO_APPROVE", "AUTO_REJECT", "ABORT")
    assert set(FINITE_POLICIES) == {"AUTO_APPROVE", "AUTO_REJECT", "ABORT"}
    assert PAUSE_REASON_MAX == 500


@pytest.mark.parametrize("config", [[], "PT15M", 3, True])
def test_a_hitl_config_that_is_not_an_object_is_refused(config: object) -> None:
    assert validate_hitl_config(config) == [FieldError("hitlConfig", "hitlConfig must be an object")]


@pytest.mark.parametrize("policy", ["AUTO_APPROVE", "AUTO_REJECT", "ABORT"])
def test_a_finite_policy_requires_an_approval_timeout(policy: str) -> None:
    assert validate_hitl_config({"timeoutPolicy": policy}) == [
        FieldError("hitlConfig.approvalTimeout", FINITE_NEEDS_TIMEOUT)
    ]


@pytest.mark.parametrize("blank", [None, "", "   "])
def test_a_blank_approval_timeout_counts_as_missing_for_a_finite_policy(blank: str | None) -> None:
    errors = validate_hitl_config({"timeoutPolicy": "ABORT", "approvalTimeout": blank})
    assert [e.message for e in errors] == [FINITE_NEEDS_TIMEOUT]


@pytest.mark.parametrize("policy", ["WAIT_INDEFINITELY", None])
def test_waiting_indefinitely_needs_no_timeout(policy: str | None) -> None:
    assert validate_hitl_config({"timeoutPolicy": policy}) == []


@pytest.mark.parametrize("timeout", ["PT30S", "PT15M", "P1D", "PT0.5S", "pt2h"])
def test_a_finite_policy_with_a_positive_duration_is_valid(timeout: str) -> None:
    assert validate_hitl_config({"timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": timeout}) == []


@pytest.mark.parametrize("timeout", ["30m", "P1W", "P1M", "PT", "15 minutes"])
def test_a_malformed_approval_timeout_is_refused(timeout: str) -> None:
    errors = validate_hitl_config({"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": timeout})
    assert errors == [FieldError("hitlConfig.approvalTimeout", not_iso(timeout))]


@pytest.mark.parametrize("timeout", ["PT0S", "-PT5M"])
def test_a_zero_or_negative_approval_timeout_is_refused(timeout: str) -> None:
    errors = validate_hitl_config({"timeoutPolicy": "AUTO_REJECT", "approvalTimeout": timeout})
    assert errors == [FieldError("hitlConfig.approvalTimeout", not_positive(timeout))]


@pytest.mark.parametrize("policy", ["WAIT_INDEFINITELY", None])
def test_an_approval_timeout_is_format_checked_even_when_waiting_indefinitely(policy: str | None) -> None:
    errors = validate_hitl_config({"timeoutPolicy": policy, "approvalTimeout": "30m"})
    assert [e.message for e in errors] == [not_iso("30m")]
    errors = validate_hitl_config({"timeoutPolicy": policy, "approvalTimeout": "PT0S"})
    assert [e.message for e in errors] == [not_positive("PT0S")]


def test_an_approval_timeout_that_is_not_a_string_is_not_a_duration() -> None:
    errors = validate_hitl_config({"approvalTimeout": 900})
    assert [e.message for e in errors] == [not_iso("900")]


@pytest.mark.parametrize("policy", ["NEVER", "auto_reject", 1])
def test_an_unknown_timeout_policy_is_refused(policy: object) -> None:
    errors = validate_hitl_config({"timeoutPolicy": policy, "approvalTimeout": "PT5M"})
    assert [e.field for e in errors] == ["hitlConfig.timeoutPolicy"]
    assert "must be one of WAIT_INDEFINITELY, AUTO_APPROVE, AUTO_REJECT, ABORT" in errors[0].message


def test_a_pause_reason_of_500_characters_is_accepted() -> None:
    assert validate_hitl_config({"pauseReason": "x" * 500}) == []


def test_a_pause_reason_of_501_characters_is_refused() -> None:
    assert validate_hitl_config({"pauseReason": "x" * 501}) == [
        FieldError("hitlConfig.pauseReason", PAUSE_REASON_TOO_LONG)
    ]


def test_pause_reason_length_is_counted_in_utf16_units_like_java() -> None:
    assert validate_hitl_config({"pauseReason": "\U0001f600" * 250}) == []
    assert [e.message for e in validate_hitl_config({"pauseReason": "\U0001f600" * 251})] == [
        PAUSE_REASON_TOO_LONG
    ]


def test_a_pause_reason_that_is_not_a_string_is_refused() -> None:
    errors = validate_hitl_config({"pauseReason": ["a"]})
    assert errors == [FieldError("hitlConfig.pauseReason", "hitlConfig.pauseReason must be a string")]


def test_an_unknown_key_is_refused_and_named() -> None:
    errors = validate_hitl_config({"approvalTimeout": "PT5M", "timeoutPolcy": "AUTO_REJECT"})
    assert [e.field for e in errors] == ["hitlConfig.timeoutPolcy"]
    assert "timeoutPolcy" in errors[0].message
    assert "wait forever" in errors[0].message


def test_tool_approvals_is_accepted_as_an_object_without_checking_its_content() -> None:
    assert validate_hitl_config({"toolApprovals": {"requireApproval": ["transfer_*"]}}) == []
    assert validate_hitl_config({"toolApprovals": None}) == []


def test_tool_approvals_that_is_not_an_object_is_refused() -> None:
    assert validate_hitl_config({"toolApprovals": ["transfer_*"]}) == [
        FieldError("hitlConfig.toolApprovals", "hitlConfig.toolApprovals must be an object")
    ]


def test_every_error_is_reported_at_once_with_its_full_path() -> None:
    errors = validate_hitl_config(
        {
            "timeoutPolicy": "AUTO_APPROVE",
            "pauseReason": "y" * 501,
            "toolApprovals": "all",
            "approvalTimout": "PT5M",
        }
    )
    assert sorted(e.field for e in errors) == [
        "hitlConfig.approvalTimeout",
        "hitlConfig.approvalTimout",
        "hitlConfig.pauseReason",
        "hitlConfig.toolApprovals",
    ]
    assert FINITE_NEEDS_TIMEOUT in [e.message for e in errors]
    assert PAUSE_REASON_TOO_LONG in [e.message for e in errors]


def test_the_field_path_prefixes_fields_and_messages() -> None:
    errors = validate_hitl_config({"timeoutPolicy": "ABORT", "approvalTimeout": "PT0S"}, "agent.hitlConfig")
    assert errors == [
        FieldError(
            "agent.hitlConfig.approvalTimeout",
            "agent.hitlConfig.approvalTimeout must be a positive duration, got 'PT0S'",
        )
    ]


def test_a_field_error_renders_as_field_and_message() -> None:
    error = FieldError("hitlConfig.pauseReason", "too long")
    assert error.as_dict() == {"field": "hitlConfig.pauseReason", "message": "too long"}
