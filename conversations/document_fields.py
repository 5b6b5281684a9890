"""The JSON-shape checks every part of an agent document shares (field paths, types, references).

Every check appends to a DocumentReport (``report.error`` / ``report.warn``) instead of raising, so one
save reports every problem of the document at once, each under its full field path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from common.body_rules import body_errors
from common.edit_distance import near_miss
from common.field_errors import FieldError
from common.field_errors import child as child
from common.field_errors import json_type as json_type
from conversations.pipeline.conversation_memory import (
    CONVERSATION_END,
    CONVERSATION_START,
    PAUSE_CONVERSATION,
    RESERVED_ACTIONS,
    STOP_CONVERSATION,
)
from conversations.pipeline.expressions import Expression, ExpressionSyntaxError, parse_expressions

IDENTIFIER = re.compile(r"[A-Za-z0-9_.-]+")
OCCURRENCES = ("currentStep", "lastStep", "anyStep", "never")
CONDITION_TYPES = (
    "inputmatcher",
    "actionmatcher",
    "propertymatcher",
    "contextmatcher",
    "negation",
    "connector",
)
CONTEXT_TYPES = ("string", "object", "expressions")
PROPERTY_SCOPES = ("conversation", "step")
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
MAX_CONDITION_DEPTH = 16

_WHAT_RESERVED_ACTION_DOES = {
    PAUSE_CONVERSATION: "it will not pause",
    STOP_CONVERSATION: "it will not stop the conversation",
    CONVERSATION_START: "it will not run at the start of the conversation",
    CONVERSATION_END: "it will not end the conversation",
}


@dataclass
class DocumentReport:
    """Every error and warning of one document, each under its field path."""

    errors: list[FieldError] = field(default_factory=list)
    warnings: list[FieldError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def error(self, path: str, message: str) -> None:
        self.errors.append(FieldError(path, message))

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(FieldError(path, message))


# --- JSON shapes -------------------------------------------------------------------------------------


def readable_document(report: DocumentReport, doc: object, what: str) -> dict | None:
    """``doc`` when it is a JSON object PostgreSQL can store; else None, with why in ``report`` (a document
    nested too deep, or holding what jsonb refuses, is not read further)."""
    if not isinstance(doc, dict):
        report.error("", f"the {what} document must be a JSON object")
        return None
    unstorable = body_errors(doc)
    for error in unstorable:
        report.error(error["field"], error["message"])
    return None if unstorable else doc


def expect_unique(
    report: DocumentReport, value: str | None, path: str, seen: dict[str, str], what: str
) -> None:
    """``value`` (None: already reported) must not repeat one of ``seen`` (value -> where it first stood)."""
    if value is None:
        return
    if value in seen:
        report.error(path, f"duplicate {what} '{value}' (also {seen[value]})")
    else:
        seen[value] = path


def expect_object(report: DocumentReport, value: object, path: str, *, required: bool = True) -> dict | None:
    if value is None:
        if required:
            report.error(path, "is required")
        return None
    if not isinstance(value, dict):
        report.error(path, f"must be an object, got {json_type(value)}")
        return None
    return value


def expect_list(
    report: DocumentReport, value: object, path: str, *, required: bool = True, non_empty: bool = False
) -> list | None:
    if value is None:
        if required:
            report.error(path, "is required")
        return None
    if not isinstance(value, list):
        report.error(path, f"must be an array, got {json_type(value)}")
        return None
    if non_empty and not value:
        report.error(path, "must not be empty")
    return value


def expect_objects(
    report: DocumentReport, value: object, path: str, *, required: bool = True, non_empty: bool = False
) -> Iterator[tuple[dict, str]]:
    """Each object of a list of objects with its field path; every other entry is reported and skipped."""
    items = expect_list(report, value, path, required=required, non_empty=non_empty)
    for index, item in enumerate(items or []):
        item_path = child(path, index)
        entry = expect_object(report, item, item_path)
        if entry is not None:
            yield entry, item_path


def expect_string(
    report: DocumentReport,
    value: object,
    path: str,
    *,
    required: bool = True,
    non_empty: bool = False,
    max_length: int | None = None,
    pattern: re.Pattern[str] | None = None,
) -> str | None:
    if value is None:
        if required:
            report.error(path, "is required")
        return None
    if not isinstance(value, str):
        report.error(path, f"must be a string, got {json_type(value)}")
        return None
    if non_empty and not value.strip():
        report.error(path, "must not be empty")
        return None
    if max_length is not None and len(value) > max_length:
        report.error(path, f"exceeds the maximum length of {max_length} characters")
    elif pattern is not None and not pattern.fullmatch(value):
        report.error(path, f"'{value}' may only contain the characters {pattern.pattern}")
    return value


def expect_choice(
    report: DocumentReport,
    value: object,
    path: str,
    choices: tuple[str, ...],
    *,
    required: bool = True,
    ignore_case: bool = False,
) -> str | None:
    """The canonical spelling of ``value`` among ``choices``, or None (reported unless absent and optional)."""
    if value is None:
        if required:
            report.error(path, f"is required (one of {', '.join(choices)})")
        return None
    for choice in choices:
        if value == choice or (
            ignore_case and isinstance(value, str) and value.casefold() == choice.casefold()
        ):
            return choice
    shown = f"'{value}'" if isinstance(value, str) else json_type(value)
    report.error(path, f"{shown} must be one of {', '.join(choices)}")
    return None


def expect_boolean(report: DocumentReport, value: object, path: str) -> None:
    if value is not None and not isinstance(value, bool):
        report.error(path, f"must be true or false, got {json_type(value)}")


def expect_string_list(
    report: DocumentReport, value: object, path: str, *, required: bool = True, non_empty: bool = False
) -> list[str]:
    """The non-empty strings of a list of strings; every other entry is reported."""
    items = expect_list(report, value, path, required=required, non_empty=non_empty)
    names: list[str] = []
    for index, item in enumerate(items or []):
        name = expect_string(report, item, child(path, index), non_empty=True)
        if name is not None:
            names.append(name)
    return names


def expect_string_map(report: DocumentReport, value: object, path: str, *, repeatable: bool = False) -> None:
    """An object of string values (``repeatable``: a list of strings repeats the name, as in a query)."""
    mapping = expect_object(report, value, path, required=False)
    for key, item in (mapping or {}).items():
        if repeatable and isinstance(item, list):
            for index, repeated in enumerate(item):
                expect_string(report, repeated, child(child(path, key), index))
        elif not isinstance(item, str):
            report.error(child(path, key), f"must be a string, got {json_type(item)}")


def expect_expressions(
    report: DocumentReport, value: object, path: str, *, required: bool = True
) -> list[Expression] | None:
    text = expect_string(report, value, path, required=required, non_empty=required)
    if text is None:
        return None
    try:
        return parse_expressions(text)
    except ExpressionSyntaxError as exc:
        report.error(path, f"'{text}' is not a valid expression list: {exc}")
        return None


def warn_unknown_keys(
    report: DocumentReport, obj: dict, path: str, known: tuple[str, ...], what: str
) -> None:
    for key in obj:
        if key not in known:
            report.warn(child(path, key), f"'{key}' is not a {what} field and is ignored")


def refuse_unknown_keys(
    report: DocumentReport, obj: dict, path: str, known: tuple[str, ...], what: str
) -> None:
    """A key the contract does not have is an error naming it, with the near miss and the allowed keys: a
    body's unknown field is never silently dropped, nor stored (S2, mass assignment)."""
    for key in obj:
        if key in known:
            continue
        hint = near_miss(key, known) if isinstance(key, str) else None
        suggestion = f"did you mean '{hint}'? " if hint else ""
        report.error(
            child(path, key), f"'{key}' is not a {what} field ({suggestion}allowed: {', '.join(known)})"
        )


def lint_action_name(report: DocumentReport, name: str, path: str) -> None:
    """Warn when an action nearly spells a reserved action: it looks like a pause but never pauses."""
    reserved = near_miss(name, RESERVED_ACTIONS)
    if reserved is not None:
        report.warn(
            path,
            f"'{name}' looks like the reserved action '{reserved}' but is not it: "
            f"{_WHAT_RESERVED_ACTION_DOES.get(reserved, 'it will not act as that reserved action')}",
        )


def expect_action_names(
    report: DocumentReport, value: object, path: str, *, required: bool = True, non_empty: bool = False
) -> list[str]:
    names = expect_string_list(report, value, path, required=required, non_empty=non_empty)
    if isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, str):
                lint_action_name(report, item, child(path, index))
    return names


# --- secret references ---------------------------------------------------------------------------------

_REFERENCE_START = re.compile(r"\$\{(vault|env|caller):")
_SECRET_REFERENCE = re.compile(r"\$\{(?:vault|env):[A-Za-z0-9_.-]{1,128}\}")
_CALLER_TOKEN = "${caller:token}"  # nosec B105  # a placeholder's name, not a password


def check_secret_references(
    report: DocumentReport, value: object, path: str, *, header_value: Callable[[tuple], bool]
) -> None:
    """Every ``${vault:…}`` / ``${env:…}`` reference in ``value`` must be well-formed, and
    ``${caller:token}`` may appear only where ``header_value(keys)`` holds (a request header value):
    anywhere else it would leak the caller's token into a URL, body or log."""
    for keys, text in _strings(value, ()):
        for match in _REFERENCE_START.finditer(text):
            start = match.start()
            field = _path_of(path, keys)
            if match.group(1) == "caller":
                if not text.startswith(_CALLER_TOKEN, start):
                    report.error(
                        field,
                        f"unknown caller reference '{_snippet(text, start)}': only ${{caller:token}} exists",
                    )
                elif not header_value(keys):
                    report.error(field, "${caller:token} may only be used in request headers")
            elif not _SECRET_REFERENCE.match(text, start):
                kind = match.group(1)
                report.error(
                    field,
                    f"malformed secret reference '{_snippet(text, start)}': expected ${{{kind}:NAME}} with a NAME "
                    "of 1 to 128 characters from A-Z a-z 0-9 _ . -",
                )


def _strings(value: object, keys: tuple) -> Iterator[tuple[tuple, str]]:
    """Every string in ``value`` with its key path, in document order (iterative: no depth limit)."""
    stack: list[tuple[tuple, object]] = [(keys, value)]
    while stack:
        keys, value = stack.pop()
        if isinstance(value, str):
            yield keys, value
        elif isinstance(value, dict):
            stack.extend(((*keys, key), item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend(((*keys, index), item) for index, item in reversed(list(enumerate(value))))


def _path_of(path: str, keys: tuple) -> str:
    for key in keys:
        path = child(path, key)
    return path


def _snippet(text: str, start: int) -> str:
    end = text.find("}", start)
    end = len(text) if end < 0 else end + 1
    return text[start : min(end, start + 40)]


def is_request_header_value(keys: tuple) -> bool:
    """Inside an httpcalls task: ``calls[k].request.headers.<name>``."""
    return (
        len(keys) == 5
        and keys[0] == "calls"
        and isinstance(keys[1], int)
        and keys[2:4] == ("request", "headers")
        and isinstance(keys[4], str)
    )


def check_target_url(report: DocumentReport, value: object, path: str) -> None:
    url = expect_string(report, value, path, non_empty=True)
    if url is None or url.startswith("${"):
        return  # the whole base URL comes from a secret; its syntax is checked with the other references
    parts = urlsplit(_SECRET_REFERENCE.sub("reference", url))
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        report.error(path, f"'{url}' must be an http(s) URL such as https://api.example.com")
