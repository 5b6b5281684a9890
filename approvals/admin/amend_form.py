"""Editing a tool call's arguments on the decision page: one input per top-level argument, and the JSON.

Every input starts with the value the page shows (pause_details(): the redacted arguments; the raw ones
never reach the browser). A call is amended only when a value differs from what was shown; then the form
sends the same ``amendedArguments`` string the REST API takes, holding the shown values of the untouched
arguments. A secret shown as ``<REDACTED>`` and left alone keeps its real value: the tool gate puts the
original back (toolgate.gate.amendments), for REST and MCP reviewers too.

The JSON box (the whole object) is for adding or removing keys, or for arguments that are not an object.
The page's script keeps the fields and the JSON in step (one edit, two views); posted with both changed,
they must agree on every field changed, else it is refused rather than merged by guess. A call whose
arguments were truncated when it paused cannot be amended at all, and gets no inputs.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from django import forms

from approvals.admin.review import ReviewCall

MARKER = "<REDACTED>"  # toolgate.outbound.redaction.REDACTED; the core may not import the tool gate
TEXT, NUMBER, BOOLEAN, JSON = "text", "number", "boolean", "json"
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)\Z")
_NOT_GIVEN = object()


class AmendError(ValueError):
    """A posted value the reviewer must correct; ``field`` is the form field it belongs to."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ArgumentInput:
    """One top-level argument's input: its key, kind, form field name and the value it starts with."""

    key: str
    kind: str
    name: str
    value: Any

    @property
    def shown(self) -> str:
        return shown_text(self.kind, self.value)

    @property
    def redacted(self) -> bool:
        return MARKER in self.shown


@dataclass(frozen=True)
class CallAmendment:
    """What the page lets a reviewer edit in one call, from the arguments it shows."""

    call: ReviewCall
    arguments: dict[str, Any] | None  # the shown arguments, when they are a JSON object
    inputs: tuple[ArgumentInput, ...]

    @property
    def amendable(self) -> bool:
        return not self.call.args_truncated

    @property
    def json_name(self) -> str:
        return f"call_{self.call.index}_amended"

    @property
    def shown_json(self) -> str:
        if self.arguments is None:
            return self.call.arguments
        return json.dumps(self.arguments, indent=2, ensure_ascii=False)

    def input_for(self, key: Any) -> ArgumentInput | None:
        return next((item for item in self.inputs if item.key == key), None)


def kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int | float):
        return NUMBER
    return TEXT if isinstance(value, str) else JSON


def shown_text(kind: str, value: Any) -> str:
    """The text an input of ``kind`` shows for ``value``; what the reviewer sees and may change."""
    if kind == TEXT:
        return value
    return json.dumps(value, ensure_ascii=False)


def call_amendment(call: ReviewCall) -> CallAmendment:
    try:
        shown = json.loads(call.arguments) if call.arguments else {}
    except (ValueError, RecursionError):
        shown = None
    if call.args_truncated or not isinstance(shown, dict):
        return CallAmendment(call=call, arguments=shown if isinstance(shown, dict) else None, inputs=())
    inputs = tuple(
        ArgumentInput(
            key=str(key), kind=kind_of(value), name=f"call_{call.index}_arg_{position}", value=value
        )
        for position, (key, value) in enumerate(shown.items())
    )
    return CallAmendment(call=call, arguments=shown, inputs=inputs)


def _widget(item: ArgumentInput) -> forms.Widget:
    attrs = {
        "data-shown": item.shown,
        "data-argument": item.key,
        "data-kind": item.kind,
        "class": "hitl-amend-input",
    }
    if item.kind == BOOLEAN:
        return forms.Select(choices=[("true", "true"), ("false", "false")], attrs=attrs)
    if item.kind == NUMBER:
        return forms.NumberInput(attrs={**attrs, "step": "any"})
    if item.kind == JSON or "\n" in item.shown:
        return forms.Textarea(attrs={**attrs, "rows": 2, "cols": 60})
    return forms.TextInput(attrs={**attrs, "size": 60})


def add_amend_fields(form: forms.Form, amendment: CallAmendment) -> None:
    """The call's inputs, each starting with the shown value; none for a call that cannot be amended."""
    if not amendment.amendable:
        return
    for item in amendment.inputs:
        form.fields[item.name] = forms.CharField(
            required=False, strip=False, label=item.key, initial=item.shown, widget=_widget(item)
        )
    form.fields[amendment.json_name] = forms.CharField(
        required=False,
        strip=False,
        label="All arguments as JSON (to add or remove keys)",
        initial=amendment.shown_json,
        widget=forms.Textarea(
            attrs={
                "rows": min(12, amendment.shown_json.count("\n") + 2),
                "cols": 80,
                "data-shown": amendment.shown_json,
                "class": "hitl-amend-json",
            }
        ),
    )


def _posted(form: forms.Form, name: str) -> Any:
    """The posted text of ``name``; _NOT_GIVEN when the browser did not send it (it changed nothing)."""
    if name not in form.data:
        return _NOT_GIVEN
    return (form.cleaned_data.get(name) or "").replace("\r\n", "\n")


def _same(left: Any, right: Any) -> bool:
    """JSON equality, strict about types (``true`` is not ``1``), key order aside."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def _parsed_json(text: str, field: str, what: str, verb: str = "is") -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if hasattr(exc, "lineno") else ""
        raise AmendError(field, f"{what} {verb} not valid JSON{where}.") from None
    except RecursionError:
        raise AmendError(field, f"{what} {verb} nested too deeply.") from None


def _number(text: str, field: str, what: str) -> int | float:
    text = text.strip()
    if _INTEGER.match(text):
        return int(text)
    try:
        value = float(text)
    except ValueError:
        raise AmendError(field, f"{what} must be a number.") from None
    if not math.isfinite(value):
        raise AmendError(field, f"{what} must be a finite number.")
    return value


def _edited_value(item: ArgumentInput, posted: str, call_word: str) -> Any:
    """The value the reviewer typed into an input whose text differs from the shown one."""
    what = f"{call_word}: {item.key}"
    if item.kind == TEXT:
        return posted
    if item.kind == NUMBER:
        return _number(posted, item.name, what)
    if item.kind == BOOLEAN:
        if posted not in ("true", "false"):
            raise AmendError(item.name, f"{what} must be true or false.")
        return posted == "true"
    return _parsed_json(posted, item.name, what)


def _edited_fields(form: forms.Form, amendment: CallAmendment, call_word: str) -> dict[str, Any]:
    edited: dict[str, Any] = {}
    errors: list[AmendError] = []
    for item in amendment.inputs:
        posted = _posted(form, item.name)
        if posted is _NOT_GIVEN or posted == item.shown:
            continue
        try:
            value = _edited_value(item, posted, call_word)
        except AmendError as exc:
            errors.append(exc)
            continue
        if not _same(value, item.value):  # "250.0" for 250 is still 250.0: a new value; "250 " is not
            edited[item.key] = value
    for error in errors:
        form.add_error(error.field, str(error))
    return edited


def amended_arguments(form: forms.Form, amendment: CallAmendment, *, approved: bool) -> str | None:
    """The call's ``amendedArguments`` (None: not amended), or errors on the form where they belong."""
    if not amendment.amendable:
        return None
    call_word = f"Call {amendment.call.tool_name}"
    edited = _edited_fields(form, amendment, call_word)
    posted_json = _posted(form, amendment.json_name)
    text = posted_json.strip() if posted_json is not _NOT_GIVEN else ""
    json_edited = bool(text) and text != amendment.shown_json.strip()
    if json_edited:
        try:
            value = _parsed_json(text, amendment.json_name, f"{call_word}: the edited arguments", "are")
        except AmendError as exc:
            form.add_error(exc.field, str(exc))
            return None
        json_edited = amendment.arguments is None or not _same(value, amendment.arguments)
        if json_edited and not isinstance(value, dict):
            form.add_error(
                amendment.json_name, f"{call_word}: the edited arguments must be a JSON object ({{…}})."
            )
            return None
    if not (edited or json_edited) or form.has_error(amendment.json_name):
        return None
    if edited and json_edited:
        # The page keeps the fields and the JSON in step: one edit, seen twice. They must agree.
        if any(key not in value or not _same(value[key], field) for key, field in edited.items()):
            form.add_error(
                amendment.json_name,
                f"{call_word}: the fields and the JSON say different things; "
                "keep one (Reset the other) and try again.",
            )
            return None
        edited = {}
    if not approved:
        target = amendment.json_name if json_edited else amendment.input_for(next(iter(edited))).name
        form.add_error(
            target,
            f"{call_word}: only an approved call can be edited. Set this call to Approve, "
            "or leave its arguments as shown.",
        )
        return None
    if json_edited:
        return text  # the reviewer's text, as REST would send it
    return json.dumps({**(amendment.arguments or {}), **edited}, ensure_ascii=False)


@dataclass(frozen=True)
class AmendBox:
    """The call's edit box as the template renders it: each input bound to the form, and the JSON."""

    amendment: CallAmendment
    inputs: tuple[tuple[ArgumentInput, forms.BoundField], ...]
    json_field: forms.BoundField | None

    @property
    def truncated(self) -> bool:
        return not self.amendment.amendable


def amend_box(form: forms.Form, amendment: CallAmendment) -> AmendBox:
    if not amendment.amendable:
        return AmendBox(amendment=amendment, inputs=(), json_field=None)
    return AmendBox(
        amendment=amendment,
        inputs=tuple((item, form[item.name]) for item in amendment.inputs),
        json_field=form[amendment.json_name],
    )
