"""The decision service's errors about a tool call, said to the reviewer on the page, next to the input.

The service speaks to API clients (``toolDecisions['call-1'].amendedArguments is not valid JSON: …``) and
keeps doing so; the page names the call by its tool and says what to do ("Call transfer_funds: the edited
arguments are not valid JSON (line 1, column 5)"). A message this module does not know is shown as the
service wrote it, after the call's name: never dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from approvals.admin.amend_form import CallAmendment

_JSON_POSITION = re.compile(r"line (\d+) column (\d+)")
CONTRADICTION = "top-level verdict is REJECTED"


@dataclass(frozen=True)
class PageError:
    field: str | None  # the form field to show it by; None: above the form
    message: str


def _amendment_message(call_word: str, message: str, path: str) -> str:
    if "is not valid JSON" in message:
        position = _JSON_POSITION.search(message)
        where = f" (line {position.group(1)}, column {position.group(2)})" if position else ""
        return f"{call_word}: the edited arguments are not valid JSON{where}."
    if "still contains <REDACTED>" in message:
        return (
            f"{call_word}: {path} still shows <REDACTED> but was edited. Replace the whole value, "
            "or leave it exactly as shown (Reset) to keep the real one."
        )
    if "cannot carry the marker" in message:
        return (
            f"{call_word}: {path} holds <REDACTED>, which only stands for a secret where one was shown. "
            "Type the real value instead."
        )
    known = {
        "only valid for an APPROVED call": "only an approved call can be edited. Set this call to Approve, "
        "or leave its arguments as shown.",
        "truncated at pause time": "its arguments were cut short when it paused, so it cannot be edited. "
        "Approve or reject it as it is.",
        "must be a JSON object": "the edited arguments must be a JSON object ({…}).",
        "exceeds the maximum size": "the edited arguments are too long (at most 32 KiB).",
        "nested too deeply": "the edited arguments are nested too deeply.",
        "must be a string holding a JSON object": "the edited arguments must be a JSON object ({…}).",
    }
    for words, said in known.items():
        if words in message:
            return f"{call_word}: {said}"
    return f"{call_word}: the edited arguments cannot be used: {message}"


def _path_text(path: Sequence[Any]) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text or "the arguments"


def call_error(
    amendment: CallAmendment, key: str, error: dict[str, Any], form_fields: Any, verdict_field: str
) -> PageError:
    """One service error about ``amendment``'s call (``key``: the last part of its field, or "")."""
    call_word = f"Call {amendment.call.tool_name}"
    message = str(error.get("message") or "")
    if key == "amendedArguments":
        path = error.get("argumentPath") if isinstance(error.get("argumentPath"), list) else []
        text = _amendment_message(call_word, message, _path_text(path))
        item = amendment.input_for(path[0]) if path else None
        field = item.name if item is not None and item.name in form_fields else amendment.json_name
        return PageError(field if field in form_fields else None, text)
    if key == "verdict":
        return PageError(verdict_field, f"{call_word}: choose Approve or Reject for this call.")
    if key == "note":
        said = (
            "the note for this call is too long (at most 1,024 characters)."
            if "exceeds" in message
            else message
        )
        return PageError(f"call_{amendment.call.index}_note", f"{call_word}: {said}")
    return PageError(None, f"{call_word} is no longer waiting for a decision; reload the page. ({message})")


def contradiction_message(tool_names: Sequence[str]) -> str:
    names = ", ".join(tool_names) or "a call"
    return (
        f"You rejected the request, so {names} cannot be approved on its own. Choose Approve, "
        "or set this call to Reject."
    )


def page_errors(
    errors: Sequence[dict[str, Any]],
    amendments: Sequence[CallAmendment],
    approved_calls: Sequence[str],
    form_fields: Any,
) -> list[PageError] | None:
    """The service's tool-call errors in reviewer language; None when one is not about tool calls (the
    caller then places them as before)."""
    placed: list[PageError] = []
    for error in errors:
        field = str(error.get("field") or "")
        if field == "toolDecisions" and CONTRADICTION in str(error.get("message") or ""):
            placed.append(PageError(None, contradiction_message(approved_calls)))
            continue
        if not field.startswith("toolDecisions."):
            return None
        rest = field.removeprefix("toolDecisions.")
        match = next(
            (
                (amendment, rest.removeprefix(amendment.call.call_id).removeprefix("."))
                for amendment in sorted(amendments, key=lambda a: -len(a.call.call_id))
                if rest == amendment.call.call_id or rest.startswith(amendment.call.call_id + ".")
            ),
            None,
        )
        if match is None:
            return None
        amendment, key = match
        placed.append(call_error(amendment, key, error, form_fields, f"call_{amendment.call.index}_verdict"))
    return placed
