"""What a kind of pause adds to the core: how its decisions are validated and how it is shown.

Lower layers know nothing of the kinds built on them: toolgate registers the TOOL_CALL validator
(per-call verdicts and amendments), the TOOL_CALL details (the pending calls, re-redacted) and, once
decided, what became of each call (``CallOutcome``) here in its AppConfig.ready(); groups registers
the PHASE and TASK ones, and their part of the admin decision page (``DecisionPage``: the discussion, its phase and transcript, a verdict per awaiting task); approval
requests the ACTION ones, their page part (the action, its arguments, the pinned request, the agent's
context) and the edit of its "Edit and approve" (``DecisionEdit``: the posted inputs as the kind's own
decision body, with its amendments).
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
class CallOutcome:
    """What became of one gated call of a decided pause, for its decision page; redacted, like every view
    of a decided pause. ``amended``: the arguments as the reviewer approved them (JSON text), None when it
    ran as asked; ``ran``: it was run (``result`` is what it returned); ``state``: one sentence saying what
    happened to it (ran, did not run and why, not run yet, outcome unknown)."""

    call_id: str
    verdict: str
    note: str
    amended: str | None
    ran: bool
    state: str
    result: str = ""


# The outcome of each gated call of a decided pause, by call id (empty while it waits); toolgate registers it.
CallOutcomeReader = Callable[["Pause"], dict[str, CallOutcome]]


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
class PageBlock:
    """A text of a kind's section shown exactly as it is, in its own box (a request as it will be sent,
    an agent's context as JSON). ``key`` names the box on the page (``hitl-block-<key>``)."""

    key: str
    heading: str
    text: str
    help: str = ""


@dataclass(frozen=True)
class PageEdit:
    """One input of a kind's "Edit and approve", starting with ``shown``: an input left as shown changes
    nothing (a ``json`` one: a change of layout alone is no change). ``error_field`` is the field of the
    kind's decision body a refusal about it names (its sub-fields too, ``amendedRequest.url.…``), so the
    admin shows the refusal beside the input."""

    name: str
    label: str
    shown: str
    json: bool = False
    multiline: bool = False
    help: str = ""
    error_field: str = ""


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
    # What else the kind shows: tables (an action's arguments, one per line) and texts shown as they are.
    tables: tuple[PageTable, ...] = ()
    blocks: tuple[PageBlock, ...] = ()
    # False: the subject has no turns (an approval request): the page shows no "Latest turns".
    reads_turns: bool = True
    # What the other answers do, in the outlook's words; an empty one: the page does not offer it.
    cancel_label: str = ""
    guidance_label: str = ""  # a reply with guidance (its note reaches the subject as an instruction)
    guidance_help: str = ""  # the label of the guidance box: who reads the guidance, and how
    # "Edit and approve": its inputs (checked and turned into the decision by the kind's DecisionEdit),
    # what it does, and why there is none (e.g. the request forbids edits).
    edits: tuple[PageEdit, ...] = ()
    edit_label: str = ""
    edit_help: str = ""


class DecisionPage(Protocol):
    def headline(self, pause: Pause) -> str:
        """What is asked, in a reviewer's words, for the page's title and the inbox row: from the row
        itself, never a query per row. The stored reason stays what the API returns."""

    def inbox_label(self, pause: Pause) -> str:
        """Where the pause stands, for its inbox row: from the row itself, never a query per row."""

    def inbox_where(self, pause: Pause) -> str:
        """Whose subject it is (a group's name), for the inbox row; "" when the row says it elsewhere."""

    def section(self, pause: Pause, *, may_read: bool) -> PageSection:
        """The kind's part of the decision page; ``may_read``: the reviewer may read the subject's turns
        (approvals.access.may_read_turns), else nothing the subject said is in the section."""

    def with_item_verdicts(self, decision: DecisionInput, verdicts: dict[str, str]) -> DecisionInput:
        """``decision`` (verdict and note, already parsed) as the kind's own surfaces take it, carrying the
        reviewer's verdict per item (``PageItem.key``: the value as posted, checked by the kind's
        validator like any other decision's; empty for a pause with no items)."""

    def outcome(self, pause: Pause) -> str:
        """The subject's state after the decision's continuation, for the reviewer's success message."""


# The approval of an "Edit and approve" (``decision``: verdict APPROVED and note, already parsed) carrying
# the reviewer's edits: the posted text of each PageEdit that differs from what it showed, by name. The
# kind parses them into its own decision body (its ``amendments``) with its own parser, or raises BadRequest
# naming each bad field as its ``PageEdit.error_field`` does, before anything is touched; its validator
# then checks the edit inside the decision service, as it does for REST.
DecisionEdit = Callable[["Pause", "DecisionInput", dict[str, str]], "DecisionInput"]

_VALIDATORS: dict[str, DecisionValidator] = {}
_DETAILS: dict[str, DetailsProvider] = {}
_PAGES: dict[str, DecisionPage] = {}
_EDITS: dict[str, DecisionEdit] = {}
_OUTCOME_UNKNOWN: list[OutcomeUnknownReader] = []
_CALL_OUTCOMES: dict[str, CallOutcomeReader] = {}


def register_decision_validator(kind: str, validator: DecisionValidator) -> None:
    _VALIDATORS[kind] = validator


def register_details_provider(kind: str, provider: DetailsProvider) -> None:
    _DETAILS[kind] = provider


def register_decision_page(kind: str, page: DecisionPage) -> None:
    _PAGES[kind] = page


def register_decision_edit(kind: str, edit: DecisionEdit) -> None:
    _EDITS[kind] = edit


def register_call_outcomes(kind: str, reader: CallOutcomeReader) -> None:
    _CALL_OUTCOMES[kind] = reader


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


def decision_edit_for(kind: str) -> DecisionEdit | None:
    return _EDITS.get(kind)


def call_outcomes(pause: Pause) -> dict[str, CallOutcome]:
    """What became of each gated call of ``pause`` (its kind's reader), by call id; empty when none says."""
    reader = _CALL_OUTCOMES.get(pause.kind)
    return reader(pause) if reader is not None else {}
