"""A kind's "Edit and approve" on the decision page: its inputs, what the reviewer changed in them, and
where a refusal about them is shown.

The kind says what may be edited (``PageSection.edits``: an approval request's arguments as JSON, its
pinned request's URL and body), each input starting with the value the page shows. Rules:

- An input left as shown changes nothing; a JSON one whose text parses to the same value (its layout
  changed) neither.
- Only the "Edit and approve" button sends edits (``verdict`` = ``EDIT_AND_APPROVE``, an approval). An
  Approve or Reject with a changed input is refused beside the input, with what the reviewer typed kept:
  a plain Approve never silently drops an edit, and a rejection is never edited.
- "Edit and approve" with nothing changed is refused: there is no edit to approve.

What was changed goes, as posted, to the kind's ``DecisionEdit`` (approvals.pause_kinds), which parses it
into its own decision body; its refusals, and its validator's, name the input's ``error_field``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from django import forms

from approvals.pause_kinds import PageEdit

EDIT_AND_APPROVE = "EDIT_AND_APPROVE"  # the verdict the "Edit and approve" button posts
NOTHING_EDITED = "Nothing was edited: change a value below to approve with it, or press Approve."
EDIT_NEEDS_ITS_BUTTON = (
    "You changed this value: press Edit and approve to approve with it, or put back the shown value."
)


def field_name(index: int) -> str:
    return f"edit_{index}"


def add_edit_fields(form: forms.Form, edits: Sequence[PageEdit]) -> None:
    """An input per edit, starting with its shown value, and the "Edit and approve" verdict."""
    if not edits:
        return
    verdict = form.fields["verdict"]
    verdict.choices = [*verdict.choices, (EDIT_AND_APPROVE, "Edit and approve")]
    for index, edit in enumerate(edits):
        attrs = {"class": "hitl-edit-input", "data-edit": edit.name}
        if edit.multiline or edit.json:
            rows = min(16, max(3, edit.shown.count("\n") + 2))
            widget: forms.Widget = forms.Textarea(attrs={**attrs, "rows": rows, "cols": 80})
        else:
            widget = forms.TextInput(attrs={**attrs, "size": 80})
        form.fields[field_name(index)] = forms.CharField(
            required=False, strip=False, label=edit.label, initial=edit.shown, widget=widget
        )


def _posted(form: forms.Form, index: int) -> str | None:
    """The posted text (a browser's CRLF as LF), or None when the input was not sent at all."""
    name = field_name(index)
    if name not in form.data:
        return None
    return (form.cleaned_data.get(name) or "").replace("\r\n", "\n")


def _same_json(left: str, right: str) -> bool:
    """The same JSON value, strict about types (``true`` is not ``1``), key order and layout aside."""
    try:
        values = json.loads(left), json.loads(right)
    except (ValueError, RecursionError):
        return False
    return json.dumps(values[0], sort_keys=True) == json.dumps(values[1], sort_keys=True)


def changed(edit: PageEdit, posted: str | None) -> bool:
    shown = edit.shown.replace("\r\n", "\n")
    if posted is None or posted == shown:
        return False
    return not (edit.json and _same_json(posted, shown))


def edited_inputs(form: forms.Form, edits: Sequence[PageEdit], *, editing: bool) -> dict[str, str]:
    """The changed inputs' text by the edit's name; the rules of the module as errors on the form."""
    edited = {}
    for index, edit in enumerate(edits):
        posted = _posted(form, index)
        if not changed(edit, posted):
            continue
        if not editing:
            form.add_error(field_name(index), EDIT_NEEDS_ITS_BUTTON)
            continue
        edited[edit.name] = posted or ""
    if editing and not edited:
        form.add_error(None, NOTHING_EDITED)
    return edited


def edit_field_for(edits: Sequence[PageEdit], service_field: str) -> str | None:
    """The input a refusal naming ``service_field`` belongs beside (its field or one of its sub-fields)."""
    for index, edit in enumerate(edits):
        if edit.error_field and (
            service_field == edit.error_field or service_field.startswith(edit.error_field + ".")
        ):
            return field_name(index)
    return None


@dataclass(frozen=True)
class EditRow:
    edit: PageEdit
    field: forms.BoundField


def edit_rows(form: forms.Form) -> list[EditRow]:
    """Each edit with its bound input, as the template renders them."""
    edits: Sequence[PageEdit] = getattr(form, "edits", ())
    return [EditRow(edit, form[field_name(index)]) for index, edit in enumerate(edits)]
