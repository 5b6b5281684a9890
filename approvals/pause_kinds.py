"""What a kind of pause adds to the core: how its decisions are validated and how it is shown.

Lower layers know nothing of the kinds built on them: toolgate registers the TOOL_CALL validator
(per-call verdicts and amendments) and the TOOL_CALL details (the pending calls, re-redacted) here in
its AppConfig.ready().
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from approvals.decision_input import DecisionInput
    from approvals.models import Pause

# Validate a decision against the pause (raise BadRequest); return extra audit detail for it.
DecisionValidator = Callable[["Pause", "DecisionInput"], dict[str, Any]]
# The approver-facing pauseDetails of a pause.
DetailsProvider = Callable[["Pause"], dict[str, Any]]

_VALIDATORS: dict[str, DecisionValidator] = {}
_DETAILS: dict[str, DetailsProvider] = {}


def register_decision_validator(kind: str, validator: DecisionValidator) -> None:
    _VALIDATORS[kind] = validator


def register_details_provider(kind: str, provider: DetailsProvider) -> None:
    _DETAILS[kind] = provider


def decision_validator_for(kind: str) -> DecisionValidator | None:
    return _VALIDATORS.get(kind)


def details_provider_for(kind: str) -> DetailsProvider | None:
    return _DETAILS.get(kind)
