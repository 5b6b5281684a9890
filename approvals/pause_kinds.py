"""What a kind of pause adds to the core: how its decisions are validated and how it is shown.

Lower layers know nothing of the kinds built on them: toolgate registers the TOOL_CALL validator
(per-call verdicts and amendments) and the TOOL_CALL details (the pending calls, re-redacted) here in
its AppConfig.ready(); groups registers the PHASE and TASK ones, and their part of the admin decision
page (``DecisionPage``: the discussion, its phase and transcript, a verdict per awaiting task).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from approvals.decision_input import DecisionInput
    from approvals.models import Pause

# Validate a decision against the pause (raise BadRequest); return extra audit detail for it.
DecisionValidator = Callable[["Pause", "DecisionInput"], dict[str, Any]]


class DetailsProvider(Protocol):
    def __call__(self, pause: Pause, *, reviewer: bool = False) -> dict[str, Any]:
        """The pauseDetails of ``pause``. ``reviewer``: for a reviewer deciding it while it waits
        (approvals.access.sees_what_runs), who is shown every byte the model controls; everyone else
        gets the redacted view."""


# The side-effecting steps an earlier, interrupted continuation of a pause claimed and never recorded
# (toolgate's step journal registers it): allow-listed, redacted entries, e.g. {step, method, path, claimedAt}.
OutcomeUnknownReader = Callable[["Pause"], list[dict[str, Any]]]

Facts = tuple[tuple[str, str], ...]  # (label, text) rows


@dataclass(frozen=True)
class PageItem:
    """One part of a pause decided on its own (a task of a TASK pause), and what the reviewer reads of it.

    ``key`` is the id the decision names it by; ``error_field`` the field the kind's validator names in
    a refusal about it, so the admin shows the refusal next to the item's own verdict."""

    key: str
    title: str
    facts: Facts
    decidable: bool = True
    error_field: str = ""


@dataclass(frozen=True)
class PageTable:
    heading: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class PageSection:
    """A kind's own part of the admin decision page. ``transcript`` is the subject's record, shown instead
    of the surface's latest turns (None when the reviewer may not read it: the page says so)."""

    heading: str
    facts: Facts
    items_heading: str = ""
    items: tuple[PageItem, ...] = ()
    items_help: str = ""
    transcript: PageTable | None = None
    note_help: str = ""  # where the decision's note goes (default: the conversation, on a rejection)
    approve_label: str = "Approve"
    reject_label: str = "Reject"
    cancel_hint: str = ""


class DecisionPage(Protocol):
    def inbox_label(self, pause: Pause) -> str:
        """Where the pause stands, for its inbox row: from the row itself, never a query per row."""

    def section(self, pause: Pause, *, may_read: bool) -> PageSection:
        """The kind's part of the decision page; ``may_read``: the reviewer may read the subject's turns
        (approvals.access.may_read_turns), else nothing the subject said is in the section."""

    def with_item_verdicts(self, decision: DecisionInput, verdicts: dict[str, str]) -> DecisionInput:
        """``decision`` (verdict and note, already parsed) as the kind's own surfaces take it, carrying the
        reviewer's verdict per item (``PageItem.key``: the value as posted, checked by the kind's
        validator like any other decision's; empty for a pause with no items)."""

    def outcome(self, pause: Pause) -> str:
        """The subject's state after the decision's continuation, for the reviewer's success message."""


_VALIDATORS: dict[str, DecisionValidator] = {}
_DETAILS: dict[str, DetailsProvider] = {}
_PAGES: dict[str, DecisionPage] = {}
_OUTCOME_UNKNOWN: list[OutcomeUnknownReader] = []


def register_decision_validator(kind: str, validator: DecisionValidator) -> None:
    _VALIDATORS[kind] = validator


def register_details_provider(kind: str, provider: DetailsProvider) -> None:
    _DETAILS[kind] = provider


def register_decision_page(kind: str, page: DecisionPage) -> None:
    _PAGES[kind] = page


def register_outcome_unknown_reader(reader: OutcomeUnknownReader) -> None:
    if reader not in _OUTCOME_UNKNOWN:
        _OUTCOME_UNKNOWN.append(reader)


def outcome_unknown_steps(pause: Pause) -> list[dict[str, Any]]:
    """What every registered journal says is of unknown outcome for ``pause`` (empty when none is)."""
    return [entry for reader in _OUTCOME_UNKNOWN for entry in reader(pause)]


def decision_validator_for(kind: str) -> DecisionValidator | None:
    return _VALIDATORS.get(kind)


def details_provider_for(kind: str) -> DetailsProvider | None:
    return _DETAILS.get(kind)


def decision_page_for(kind: str) -> DecisionPage | None:
    return _PAGES.get(kind)
