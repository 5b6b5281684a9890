"""Save-time validation of an agent's ``hitlConfig``.

A bad config is refused when the agent is saved or imported, never degraded at run time: a finite
timeout policy without a duration, or a misspelt key, would otherwise leave a pause waiting forever.
"""

from __future__ import annotations

import json

from approvals.routing import ROUTING_KEYS, routing_errors
from common.durations import InvalidDuration, NonPositiveDuration, positive_duration
from common.field_errors import FieldError, utf16_length

TIMEOUT_POLICIES = ("WAIT_INDEFINITELY", "AUTO_APPROVE", "AUTO_REJECT", "ABORT")
FINITE_POLICIES = ("AUTO_APPROVE", "AUTO_REJECT", "ABORT")
DEFAULT_TIMEOUT_POLICY = "WAIT_INDEFINITELY"
PAUSE_REASON_MAX = 500
HITL_CONFIG_KEYS = (
    "approvalTimeout",
    "timeoutPolicy",
    "pauseReason",
    "toolApprovals",
    "allowSelfApproval",
    *ROUTING_KEYS,
)


def validate_hitl_config(config: object, field_path: str = "hitlConfig") -> list[FieldError]:
    """Every problem of ``config``, each naming its full field path under ``field_path``.

    ``None`` (JSON ``null``) means no hitlConfig and is valid. ``toolApprovals`` is only checked to be
    an object here; its content has rules of its own.
    """
    if config is None:
        return []
    if not isinstance(config, dict):
        return [FieldError(field_path, f"{field_path} must be an object")]
    errors = [_unknown_key_error(key, field_path) for key in config if key not in HITL_CONFIG_KEYS]
    errors += timeout_errors(config, field_path)
    errors += pause_reason_errors(config.get("pauseReason"), field_path)
    errors += allow_self_approval_errors(config.get("allowSelfApproval"), field_path)
    errors += routing_errors(config, field_path)
    tool_approvals = config.get("toolApprovals")
    if tool_approvals is not None and not isinstance(tool_approvals, dict):
        errors.append(
            FieldError(f"{field_path}.toolApprovals", f"{field_path}.toolApprovals must be an object")
        )
    return errors


def timeout_errors(config: dict, field_path: str) -> list[FieldError]:
    """The ``timeoutPolicy`` and ``approvalTimeout`` of one block (a hitlConfig, a toolApprovals block):
    a known policy, and a duration of its own when the policy is finite (else the policy never fires)."""
    policy = config.get("timeoutPolicy")
    policy_errors = timeout_policy_errors(policy, field_path)
    return policy_errors + approval_timeout_errors(
        config.get("approvalTimeout"),
        finite_policy=not policy_errors and is_finite_policy(policy),
        field_path=field_path,
    )


def is_finite_policy(policy: object) -> bool:
    """A policy that fires when the timeout expires; null means WAIT_INDEFINITELY, which never fires."""
    return policy in FINITE_POLICIES


def timeout_policy_errors(policy: object, field_path: str) -> list[FieldError]:
    if policy is None or policy in TIMEOUT_POLICIES:
        return []
    return [
        FieldError(
            f"{field_path}.timeoutPolicy",
            f"{field_path}.timeoutPolicy {_shown(policy)} must be one of {', '.join(TIMEOUT_POLICIES)}",
        )
    ]


def approval_timeout_errors(timeout: object, *, finite_policy: bool, field_path: str) -> list[FieldError]:
    """The duration check: a finite policy needs a duration; any duration given must be positive ISO-8601.

    A duration next to WAIT_INDEFINITELY (or no policy) is still format-checked, so a typo is caught
    before someone switches the policy on.
    """
    field = f"{field_path}.approvalTimeout"
    if timeout is None or (isinstance(timeout, str) and not timeout.strip()):
        if not finite_policy:
            return []
        return [
            FieldError(
                field,
                f"{field_path}: a finite timeoutPolicy (AUTO_APPROVE/AUTO_REJECT/ABORT) requires an "
                'approvalTimeout (ISO-8601 duration, e.g. "PT30M") — without it the policy never fires',
            )
        ]
    invalid = FieldError(
        field,
        f"{field} '{_text(timeout)}' is not a valid ISO-8601 duration "
        '(expected e.g. "PT30S", "PT15M", "PT2H")',
    )
    if not isinstance(timeout, str):
        return [invalid]
    try:
        positive_duration(timeout)
    except InvalidDuration:
        return [invalid]
    except NonPositiveDuration:
        return [FieldError(field, f"{field} must be a positive duration, got '{timeout}'")]
    return []


def pause_reason_errors(reason: object, field_path: str) -> list[FieldError]:
    field = f"{field_path}.pauseReason"
    if reason is None:
        return []
    if not isinstance(reason, str):
        return [FieldError(field, f"{field} must be a string")]
    if utf16_length(reason) > PAUSE_REASON_MAX:
        return [
            FieldError(
                field,
                f"{field} exceeds the maximum length of {PAUSE_REASON_MAX} characters — "
                "it is approver-facing summary text, not documentation",
            )
        ]
    return []


def allow_self_approval_errors(value: object, field_path: str) -> list[FieldError]:
    """``allowSelfApproval`` is a boolean or absent: a string "false" would read as true to some and as
    false to others, and who may sign off a pause must not depend on that."""
    if value is None or isinstance(value, bool):
        return []
    field = f"{field_path}.allowSelfApproval"
    return [FieldError(field, f"{field} must be true or false, got {json.dumps(value)}")]


def _unknown_key_error(key: str, field_path: str) -> FieldError:
    return FieldError(
        f"{field_path}.{key}",
        f"{field_path}.{key} is not a hitlConfig field (allowed: {', '.join(HITL_CONFIG_KEYS)}) — "
        "a misspelt key would be ignored and the pause would wait forever",
    )


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _shown(value: object) -> str:
    return f"'{value}'" if isinstance(value, str) else json.dumps(value)
