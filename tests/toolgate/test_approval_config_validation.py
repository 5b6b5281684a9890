"""Save-time validation of toolApprovals: every message, each naming its full
field path, through ``validate_tool_approvals`` and through the REST save and ZIP import of an agent
document (400 naming the field), plus the save-time warnings."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from common.field_errors import FieldError
from conversations.models import Agent
from harnesses.factories import account_bot
from toolgate.gate.approval_config import tool_approvals_warnings, validate_tool_approvals

FP = "hitlConfig.toolApprovals"
TASK_FP = "workflows[0].tasks[4].toolApprovals"
MPC_SUGGESTION = (
    "unknown tool source prefix 'mpc:' in pattern 'mpc:*' — did you mean 'mcp:'? — known sources: builtin, "
    "http, mcp, a2a, dynamic, memory, recall; only the http source may be qualified by method, e.g. 'http.post:'"
)
FINITE_NEEDS_TIMEOUT = (
    f"{FP}: a finite timeoutPolicy (AUTO_APPROVE/AUTO_REJECT/ABORT) requires an approvalTimeout "
    '(ISO-8601 duration, e.g. "PT30M") — without it the policy never fires'
)


def errors_of(config: object, field_path: str = FP) -> list[tuple[str, str]]:
    return [(error.field, error.message) for error in validate_tool_approvals(config, field_path)]


def only_error(config: object, field_path: str = FP) -> tuple[str, str]:
    (error,) = errors_of(config, field_path)
    return error


GATED = {"requireApproval": ["mcp:*"]}


# --- valid configs ---------------------------------------------------------------------------------


def test_the_documented_examples_are_valid() -> None:
    agent_level = {
        "requireApproval": ["mcp:*", "delete_*", "transfer_funds"],
        "exempt": ["mcp:read_*"],
        "maxPausesPerTurn": 3,
        "maxAutoApprovalsPerTurn": 2,
        "onNoProgress": "WAIT_FOR_HUMAN",
        "approvalTimeout": "PT30M",
        "timeoutPolicy": "AUTO_REJECT",
        "pauseReason": "Approval required for {toolNames}",
        "pendingMessage": "Waiting for a human to approve {toolNames}…",
        "inGroupTurns": "REJECT",
    }
    with_rules = {
        "requireApproval": ["http.post:*", "http.put:*", "http.patch:*", "http.delete:*"],
        "exempt": ["http.get:*"],
        "rules": [
            {
                "match": "http.post:/agentstore/agents",
                "timeoutPolicy": "WAIT_INDEFINITELY",
                "pauseReason": "Creating a new agent — review the whole config",
            },
            {
                "match": "http.post:/administration/{environment}/deploy/{agentId}",
                "timeoutPolicy": "AUTO_REJECT",
                "approvalTimeout": "PT5M",
            },
            {"match": "http.delete:*", "timeoutPolicy": "WAIT_INDEFINITELY"},
        ],
    }
    assert errors_of(agent_level) == []
    assert errors_of(with_rules) == []


@pytest.mark.parametrize(
    "config", [None, {}, {"requireApproval": []}, {"requireApproval": None, "exempt": []}]
)
def test_absent_or_empty_blocks_are_valid(config: object) -> None:
    assert errors_of(config) == []


def test_a_broader_rule_may_overlap_an_exemption() -> None:
    config = {"requireApproval": ["http.*:*"], "exempt": ["http.get:*"], "rules": [{"match": "http.*:*"}]}
    assert errors_of(config) == []


def test_the_block_must_be_an_object() -> None:
    assert only_error(["mcp:*"]) == (FP, f"{FP} must be an object")


def test_unknown_keys_are_errors() -> None:
    field, message = only_error({"requireApprovals": ["mcp:*"]})
    assert field == f"{FP}.requireApprovals"
    assert message.startswith(
        f"{FP}.requireApprovals is not a toolApprovals field (allowed: requireApproval,"
    )
    field, message = only_error({**GATED, "rules": [{"match": "mcp:*", "timeoutPolicys": "ABORT"}]})
    assert field == f"{FP}.rules[0].timeoutPolicys"
    assert (
        "is not a rule field (allowed: match, timeoutPolicy, approvalTimeout, pauseReason, pendingMessage, "
        "allowSelfApproval, approvers, requiredApprovals, escalation, remindBefore, notifyApprovers, "
        "notifyRequester)" in message
    )


# --- 1. patterns and duplicates --------------------------------------------------------------------


def test_bad_pattern_names_its_index() -> None:
    assert only_error({"requireApproval": ["delete_*", "mpc:*"]}) == (
        f"{FP}.requireApproval[1]",
        f"{FP}.requireApproval[1]: {MPC_SUGGESTION}",
    )


def test_bad_exempt_pattern_names_its_index() -> None:
    assert only_error({"requireApproval": ["*"], "exempt": ["ok", "a b"]}) == (
        f"{FP}.exempt[1]",
        f"{FP}.exempt[1]: pattern 'a b' contains illegal characters — allowed: A-Za-z0-9_-.:* plus / {{ }} "
        "for endpoint paths (tool names never contain spaces)",
    )


def test_method_qualified_non_http_prefix_is_refused() -> None:
    field, message = only_error({"requireApproval": ["mcp.post:*"]})
    assert field == f"{FP}.requireApproval[0]"
    assert message.startswith(f"{FP}.requireApproval[0]: unknown tool source prefix 'mcp.post:'")


def test_blank_and_non_string_patterns_are_refused() -> None:
    assert errors_of({"requireApproval": ["", None, 7]}) == [
        (f"{FP}.requireApproval[0]", f"{FP}.requireApproval[0]: pattern must not be blank"),
        (f"{FP}.requireApproval[1]", f"{FP}.requireApproval[1]: pattern must not be blank"),
        (f"{FP}.requireApproval[2]", f"{FP}.requireApproval[2]: pattern must be a string, got number"),
    ]


def test_pattern_lists_must_be_arrays() -> None:
    assert only_error({"requireApproval": "mcp:*"}) == (
        f"{FP}.requireApproval",
        f"{FP}.requireApproval must be an array of patterns",
    )


def test_duplicate_pattern_in_one_list() -> None:
    assert only_error({"requireApproval": ["mcp:*", "delete_*", "mcp:*"]}) == (
        f"{FP}.requireApproval[2]",
        f"duplicate pattern 'mcp:*' in {FP}.requireApproval",
    )
    assert only_error({"requireApproval": ["*"], "exempt": ["a", "a"]}) == (
        f"{FP}.exempt[1]",
        f"duplicate pattern 'a' in {FP}.exempt",
    )


# --- 2. and 3. exempt ------------------------------------------------------------------------------


@pytest.mark.parametrize("require", [None, []])
def test_exempt_without_require_approval_has_no_effect(require: object) -> None:
    config = {"exempt": ["mcp:read_*"]} | ({} if require is None else {"requireApproval": require})
    assert only_error(config) == (
        f"{FP}.exempt",
        f"{FP}.exempt has no effect without requireApproval patterns",
    )


def test_pattern_in_both_require_and_exempt() -> None:
    assert only_error({"requireApproval": ["mcp:*", "delete_*"], "exempt": ["x", "delete_*"]}) == (
        f"{FP}.exempt[1]",
        f"pattern 'delete_*' appears in both {FP}.requireApproval and .exempt; exempt would win — remove one",
    )


# --- 4. ranges -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"), [(0, "0"), (11, "11"), (-1, "-1"), (2.5, "2.5"), ("3", '"3"'), (True, "true")]
)
def test_max_pauses_per_turn_must_be_between_1_and_10(value: object, shown: str) -> None:
    assert only_error({**GATED, "maxPausesPerTurn": value}) == (
        f"{FP}.maxPausesPerTurn",
        f"{FP}.maxPausesPerTurn must be between 1 and 10, got {shown}",
    )


@pytest.mark.parametrize(("value", "shown"), [(-1, "-1"), (11, "11")])
def test_max_auto_approvals_per_turn_must_be_between_0_and_10(value: int, shown: str) -> None:
    assert only_error({**GATED, "maxAutoApprovalsPerTurn": value}) == (
        f"{FP}.maxAutoApprovalsPerTurn",
        f"{FP}.maxAutoApprovalsPerTurn must be between 0 and 10, got {shown}",
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("maxPausesPerTurn", 1),
        ("maxPausesPerTurn", 10),
        ("maxAutoApprovalsPerTurn", 0),
        ("maxAutoApprovalsPerTurn", 10),
    ],
)
def test_range_bounds_are_inclusive(name: str, value: int) -> None:
    assert errors_of({**GATED, name: value}) == []


# --- 5. onNoProgress -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["wait_for_human", "RETRY", ""])
def test_on_no_progress_must_be_a_known_action(value: str) -> None:
    assert only_error({**GATED, "onNoProgress": value}) == (
        f"{FP}.onNoProgress",
        f"{FP}.onNoProgress '{value}' must be one of WAIT_FOR_HUMAN, AUTO_REJECT, ABORT",
    )


# --- 6. inGroupTurns -------------------------------------------------------------------------------


def test_in_group_turns_inbox_is_reserved() -> None:
    assert only_error({**GATED, "inGroupTurns": "INBOX"}) == (
        f"{FP}.inGroupTurns",
        f"{FP}.inGroupTurns=INBOX is reserved for a future version; use REJECT",
    )


def test_in_group_turns_must_be_reject() -> None:
    assert only_error({**GATED, "inGroupTurns": "reject"}) == (
        f"{FP}.inGroupTurns",
        f"{FP}.inGroupTurns 'reject' must be REJECT (INBOX is reserved)",
    )
    assert errors_of({**GATED, "inGroupTurns": "REJECT"}) == []


# --- 7. the block's own timeout --------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["AUTO_APPROVE", "AUTO_REJECT", "ABORT"])
def test_finite_policy_needs_the_blocks_own_approval_timeout(policy: str) -> None:
    assert only_error({**GATED, "timeoutPolicy": policy}) == (f"{FP}.approvalTimeout", FINITE_NEEDS_TIMEOUT)


def test_approval_timeout_must_be_a_positive_iso_duration() -> None:
    assert only_error({**GATED, "approvalTimeout": "30m"}) == (
        f"{FP}.approvalTimeout",
        f"{FP}.approvalTimeout '30m' is not a valid ISO-8601 duration "
        '(expected e.g. "PT30S", "PT15M", "PT2H")',
    )
    assert only_error({**GATED, "timeoutPolicy": "ABORT", "approvalTimeout": "PT0S"}) == (
        f"{FP}.approvalTimeout",
        f"{FP}.approvalTimeout must be a positive duration, got 'PT0S'",
    )


def test_unknown_timeout_policy_is_refused() -> None:
    field, message = only_error({**GATED, "timeoutPolicy": "AUTO_DENY"})
    assert field == f"{FP}.timeoutPolicy"
    assert (
        message
        == f"{FP}.timeoutPolicy 'AUTO_DENY' must be one of WAIT_INDEFINITELY, AUTO_APPROVE, AUTO_REJECT, ABORT"
    )


# --- 8. text lengths -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pauseReason", "pendingMessage"])
def test_reason_and_message_are_capped_at_500_characters(name: str) -> None:
    assert errors_of({**GATED, name: "x" * 500}) == []
    assert only_error({**GATED, name: "x" * 501}) == (
        f"{FP}.{name}",
        f"{FP}.{name} exceeds the maximum length of 500 characters",
    )


def test_length_counts_utf16_code_units_as_java_does() -> None:
    assert only_error({**GATED, "pauseReason": "😀" * 251})[0] == f"{FP}.pauseReason"


# --- 9. rules --------------------------------------------------------------------------------------


def test_rules_without_require_approval_are_refused() -> None:
    assert only_error({"rules": [{"match": "mcp:*"}]}) == (
        f"{FP}.rules",
        f"{FP}.rules has no effect without requireApproval patterns — rules tune the friction on a gated call, "
        "they never gate one",
    )
    assert errors_of({"rules": []}) == []


def test_null_rule_is_refused() -> None:
    assert only_error({**GATED, "rules": [{"match": "mcp:a"}, None]}) == (
        f"{FP}.rules[1]",
        f"{FP}.rules[1] must not be null",
    )


def test_rule_match_goes_through_pattern_validation() -> None:
    assert only_error({**GATED, "rules": [{"match": "mpc:*"}]}) == (
        f"{FP}.rules[0].match",
        f"{FP}.rules[0].match: {MPC_SUGGESTION}",
    )
    assert only_error({**GATED, "rules": [{"timeoutPolicy": "ABORT", "approvalTimeout": "PT1M"}]}) == (
        f"{FP}.rules[0].match",
        f"{FP}.rules[0].match: pattern must not be blank",
    )


def test_duplicate_rule_match_is_refused() -> None:
    assert only_error({**GATED, "rules": [{"match": "mcp:*"}, {"match": "x"}, {"match": "mcp:*"}]}) == (
        f"{FP}.rules[2].match",
        f"duplicate rule match 'mcp:*' in {FP}.rules — only one would ever apply; merge them",
    )


def test_rule_match_identical_to_an_exempt_pattern_is_refused() -> None:
    config = {"requireApproval": ["mcp:*"], "exempt": ["mcp:read_*"], "rules": [{"match": "mcp:read_*"}]}
    assert only_error(config) == (
        f"{FP}.rules[0].match",
        f"{FP}.rules[0].match 'mcp:read_*' is also an exempt pattern, so it can never apply — an exempt call is "
        "never gated, and a rule only tunes a gated call. Remove the rule or the exemption",
    )


def test_rule_duration_is_format_checked() -> None:
    rp = f"{FP}.rules[0]"
    assert only_error({**GATED, "rules": [{"match": "mcp:*", "approvalTimeout": "P1W"}]}) == (
        f"{rp}.approvalTimeout",
        f'{rp}.approvalTimeout \'P1W\' is not a valid ISO-8601 duration (expected e.g. "PT30S", "PT15M", "PT2H")',
    )


def test_finite_rule_policy_needs_a_duration_at_either_level() -> None:
    rp = f"{FP}.rules[0]"
    assert only_error({**GATED, "rules": [{"match": "mcp:*", "timeoutPolicy": "AUTO_REJECT"}]}) == (
        f"{rp}.timeoutPolicy",
        f"{rp}.timeoutPolicy is AUTO_REJECT, which never fires without a duration — set {rp}.approvalTimeout "
        f'(ISO-8601, e.g. "PT5M") or {FP}.approvalTimeout for the rule to inherit',
    )
    inherits = {
        **GATED,
        "approvalTimeout": "PT10M",
        "rules": [{"match": "mcp:*", "timeoutPolicy": "AUTO_REJECT"}],
    }
    assert errors_of(inherits) == []
    own = {**GATED, "rules": [{"match": "mcp:*", "timeoutPolicy": "ABORT", "approvalTimeout": "PT1M"}]}
    assert errors_of(own) == []
    waits = {**GATED, "rules": [{"match": "mcp:*", "timeoutPolicy": "WAIT_INDEFINITELY"}]}
    assert errors_of(waits) == []


def test_rule_reason_and_message_are_capped_at_500_characters() -> None:
    rp = f"{FP}.rules[0]"
    config = {**GATED, "rules": [{"match": "mcp:*", "pauseReason": "x" * 501, "pendingMessage": "y" * 501}]}
    assert errors_of(config) == [
        (f"{rp}.pauseReason", f"{rp}.pauseReason exceeds the maximum length of 500 characters"),
        (f"{rp}.pendingMessage", f"{rp}.pendingMessage exceeds the maximum length of 500 characters"),
    ]


def test_every_problem_is_reported_at_once() -> None:
    config = {
        "requireApproval": ["mpc:*", "a", "a"],
        "maxPausesPerTurn": 0,
        "inGroupTurns": "INBOX",
        "rules": [None],
    }
    fields = [field for field, _ in errors_of(config)]
    assert fields == [
        f"{FP}.requireApproval[0]",
        f"{FP}.requireApproval[2]",
        f"{FP}.maxPausesPerTurn",
        f"{FP}.inGroupTurns",
        f"{FP}.rules[0]",
    ]


def test_errors_carry_the_path_they_are_given() -> None:
    (error,) = validate_tool_approvals({"requireApproval": ["mpc:*"]}, TASK_FP)
    assert error == FieldError(
        f"{TASK_FP}.requireApproval[0]", f"{TASK_FP}.requireApproval[0]: {MPC_SUGGESTION}"
    )


# --- warnings --------------------------------------------------------------------------------------


def warning_fields(
    hitl_config: object, tasks: dict[str, object] | None = None, mode: str = "strict"
) -> list[str]:
    return [warning.field for warning in tool_approvals_warnings(hitl_config, tasks or {}, mode=mode)]


def test_inherited_auto_approve_is_a_warning_for_a_block_without_its_own_policy() -> None:
    hitl = {"timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": "PT5M", "toolApprovals": GATED}
    (warning,) = tool_approvals_warnings(hitl, {}, mode="strict")
    assert warning.field == f"{FP}.timeoutPolicy"
    assert "demoted to WAIT_INDEFINITELY" in warning.message
    own = {**hitl, "toolApprovals": {**GATED, "timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT1M"}}
    assert warning_fields(own) == []
    assert warning_fields({**hitl, "timeoutPolicy": "ABORT"}) == []
    assert warning_fields({"timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": "PT5M"}) == []


def test_inherited_auto_approve_warning_follows_the_effective_task_block() -> None:
    hitl = {"timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": "PT5M"}
    assert warning_fields(hitl, {TASK_FP: GATED}) == [f"{TASK_FP}.timeoutPolicy"]
    with_agent_policy = {
        **hitl,
        "toolApprovals": {**GATED, "timeoutPolicy": "ABORT", "approvalTimeout": "PT1M"},
    }
    assert warning_fields(with_agent_policy, {TASK_FP: GATED}, mode="strict") == []  # inherits the agent's
    assert warning_fields(with_agent_policy, {TASK_FP: GATED}, mode="replace") == [f"{TASK_FP}.timeoutPolicy"]


def test_strict_mode_warns_about_task_level_exempt_and_auto_approve() -> None:
    task = {
        "requireApproval": ["delete_*"],
        "exempt": ["delete_file"],
        "timeoutPolicy": "AUTO_APPROVE",
        "approvalTimeout": "PT1M",
        "rules": [{"match": "delete_account", "timeoutPolicy": "AUTO_APPROVE"}, {"match": "delete_x"}],
    }
    assert warning_fields({}, {TASK_FP: task}) == [
        f"{TASK_FP}.exempt",
        f"{TASK_FP}.timeoutPolicy",
        f"{TASK_FP}.rules[0].timeoutPolicy",
    ]
    assert warning_fields({}, {TASK_FP: task}, mode="replace") == []


def test_task_auto_approve_is_no_warning_when_the_agent_grants_it() -> None:
    hitl = {"toolApprovals": {**GATED, "timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": "PT1M"}}
    task = {"timeoutPolicy": "AUTO_APPROVE", "approvalTimeout": "PT1M"}
    assert warning_fields(hitl, {TASK_FP: task}) == []


# --- through the REST save and the ZIP import ------------------------------------------------------


def llm_task(tool_approvals: object) -> dict:
    return {
        "id": "assistant",
        "type": "llm",
        "provider": {"type": "scripted", "script": [{"reply": "Hello."}]},
        "toolApprovals": tool_approvals,
    }


def document(*, agent: object = None, task: object = None, **hitl: object) -> dict:
    doc = account_bot()
    doc["hitlConfig"] = {**doc["hitlConfig"], **hitl}
    if agent is not None:
        doc["hitlConfig"]["toolApprovals"] = agent
    if task is not None:
        doc["workflows"][0]["tasks"].append(llm_task(task))
    return doc


def saved(client, doc: dict):
    return client.post("/agentstore/agents", doc, format="json")


BAD_AGENT_BLOCKS = [
    ({"requireApproval": ["delete_*", "mpc:*"]}, f"{FP}.requireApproval[1]", "did you mean 'mcp:'?"),
    (
        {"requireApproval": ["a", "a"]},
        f"{FP}.requireApproval[1]",
        f"duplicate pattern 'a' in {FP}.requireApproval",
    ),
    ({"exempt": ["a"]}, f"{FP}.exempt", "has no effect without requireApproval patterns"),
    ({"requireApproval": ["a"], "exempt": ["a"]}, f"{FP}.exempt[0]", "appears in both"),
    ({**GATED, "maxPausesPerTurn": 11}, f"{FP}.maxPausesPerTurn", "must be between 1 and 10, got 11"),
    ({**GATED, "maxAutoApprovalsPerTurn": -1}, f"{FP}.maxAutoApprovalsPerTurn", "must be between 0 and 10"),
    (
        {**GATED, "onNoProgress": "RETRY"},
        f"{FP}.onNoProgress",
        "must be one of WAIT_FOR_HUMAN, AUTO_REJECT, ABORT",
    ),
    ({**GATED, "inGroupTurns": "INBOX"}, f"{FP}.inGroupTurns", "reserved for a future version"),
    ({**GATED, "timeoutPolicy": "ABORT"}, f"{FP}.approvalTimeout", "requires an approvalTimeout"),
    ({**GATED, "pendingMessage": "x" * 501}, f"{FP}.pendingMessage", "exceeds the maximum length of 500"),
    ({"rules": [{"match": "a"}]}, f"{FP}.rules", "they never gate one"),
    ({**GATED, "rules": [None]}, f"{FP}.rules[0]", "must not be null"),
    (
        {**GATED, "rules": [{"match": "a"}, {"match": "a"}]},
        f"{FP}.rules[1].match",
        "duplicate rule match 'a'",
    ),
    (
        {**GATED, "exempt": ["b"], "rules": [{"match": "b"}]},
        f"{FP}.rules[0].match",
        "is also an exempt pattern",
    ),
    (
        {**GATED, "rules": [{"match": "a", "timeoutPolicy": "ABORT"}]},
        f"{FP}.rules[0].timeoutPolicy",
        "never fires",
    ),
    ({**GATED, "typo": 1}, f"{FP}.typo", "is not a toolApprovals field"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("block", "field", "fragment"), BAD_AGENT_BLOCKS)
def test_bad_agent_block_is_a_400_naming_the_field(
    admin_client, block: dict, field: str, fragment: str
) -> None:
    response = saved(admin_client, document(agent=block))
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert [e["field"] for e in errors] == [field]
    assert fragment in errors[0]["message"]
    assert not Agent.objects.exists()


@pytest.mark.django_db
def test_finite_tool_policy_needs_its_own_duration_even_when_hitl_config_has_one(admin_client) -> None:
    doc = document(agent={**GATED, "timeoutPolicy": "AUTO_REJECT"})
    assert doc["hitlConfig"]["approvalTimeout"] == "PT15M"
    response = saved(admin_client, doc)
    assert response.status_code == 400
    assert response.json()["errors"] == [{"field": f"{FP}.approvalTimeout", "message": FINITE_NEEDS_TIMEOUT}]


@pytest.mark.django_db
def test_bad_llm_task_block_is_a_400_naming_the_task_path(admin_client) -> None:
    response = saved(admin_client, document(task={"requireApproval": ["mpc:*"], "maxPausesPerTurn": 0}))
    assert response.status_code == 400, response.content
    assert response.json()["errors"] == [
        {
            "field": f"{TASK_FP}.requireApproval[0]",
            "message": f"{TASK_FP}.requireApproval[0]: {MPC_SUGGESTION}",
        },
        {
            "field": f"{TASK_FP}.maxPausesPerTurn",
            "message": f"{TASK_FP}.maxPausesPerTurn must be between 1 and 10, got 0",
        },
    ]


@pytest.mark.django_db
def test_llm_task_block_must_be_an_object(admin_client) -> None:
    response = saved(admin_client, document(task=["mcp:*"]))
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == [TASK_FP]


@pytest.mark.django_db
def test_valid_blocks_save_and_round_trip(admin_client) -> None:
    agent = {
        "requireApproval": ["mcp:*", "http.post:*"],
        "exempt": ["mcp:read_*"],
        "rules": [{"match": "http.post:/a"}],
    }
    task = {"requireApproval": ["delete_*"], "timeoutPolicy": "AUTO_REJECT", "approvalTimeout": "PT5M"}
    response = saved(admin_client, document(agent=agent, task=task))
    assert response.status_code == 201, response.content
    assert response.json()["warnings"] == []
    stored = admin_client.get(f"/agentstore/agents/{response.json()['id']}").json()["document"]
    assert stored["hitlConfig"]["toolApprovals"] == agent
    assert stored["workflows"][0]["tasks"][4]["toolApprovals"] == task


@pytest.mark.django_db
def test_save_warns_when_hitl_config_auto_approve_would_be_inherited_by_tool_pauses(admin_client) -> None:
    response = saved(admin_client, document(agent=GATED, timeoutPolicy="AUTO_APPROVE"))
    assert response.status_code == 201, response.content
    warnings = [w for w in response.json()["warnings"] if w["field"].startswith(FP)]
    assert [w["field"] for w in warnings] == [f"{FP}.timeoutPolicy"]
    assert "never inherits AUTO_APPROVE" in warnings[0]["message"]


@pytest.mark.django_db
def test_save_warns_in_strict_mode_about_task_exempt_and_auto_approve(admin_client, settings) -> None:
    task = {
        "requireApproval": ["delete_*"],
        "exempt": ["delete_file"],
        "timeoutPolicy": "AUTO_APPROVE",
        "approvalTimeout": "PT5M",
    }
    response = saved(admin_client, document(agent=GATED, task=task))
    assert response.status_code == 201, response.content
    fields = [w["field"] for w in response.json()["warnings"]]
    assert fields == [f"{TASK_FP}.exempt", f"{TASK_FP}.timeoutPolicy"]
    settings.HITL_TASK_APPROVALS_MODE = "replace"
    response = saved(admin_client, document(agent=GATED, task=task))
    assert response.status_code == 201 and response.json()["warnings"] == []


@pytest.mark.django_db
def test_zip_import_refuses_a_bad_block_naming_file_and_field(admin_client) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("good.json", json.dumps(account_bot()))
        archive.writestr("bad.json", json.dumps(document(task={"requireApproval": ["mpc:*"]})))
    response = admin_client.post("/backup/import", buffer.getvalue(), content_type="application/zip")
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert (error["file"], error["field"]) == ("bad.json", f"{TASK_FP}.requireApproval[0]")
    assert not Agent.objects.exists()
