"""A reviewer's amended arguments, merged back with the call's real values where they were shown redacted.

The decision views (the admin page, an approver's approval-status over REST and MCP while the pause
waits) show a call's arguments as the model wrote them; every other view (a Slack card, an inbox, the
owner's approval-status, a snapshot) shows them redacted: each value of a credential's shape reads
``<REDACTED>``. A reviewer who edits one argument from such a view and sends the rest back as shown must
not turn a value into the literal marker, nor be trusted to retype one they were never shown.

The rule (``merged_amendment``), by JSON path:

- a value that reads exactly as it was shown at its path (the same JSON, compared strictly) stands for the
  original value at that path: the raw value is kept, secret and all;
- any other value that still holds the marker is refused, nothing decided: a redacted value partly
  edited, a new key or item carrying it, a key holding it. Replace the whole redacted value, or leave it
  as shown;
- everything else is the reviewer's: a value replaced, a key added (without the marker) or removed.

What is stored, digested in the audit and run is the merged text, so the digest is of what really runs.
"""

from __future__ import annotations

import json
from typing import Any

from toolgate.models import PendingToolCall
from toolgate.outbound.redaction import REDACTED, redact

_MISSING = object()
Path = tuple[str | int, ...]
PARTLY_EDITED = "still contains <REDACTED> but differs from the value shown; replace the whole redacted value or leave it as shown"
NEVER_SHOWN = "holds <REDACTED> where no redacted value was shown; a new value cannot carry the marker"


class AmendmentRefused(Exception):
    """An amendment that would send the marker, or a guess at a secret, to the tool."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path_text(path)} {problem}")
        self.path = path


def shown_arguments(call: PendingToolCall) -> str:
    """The call's arguments as the redacted views show them (``pauseDetails`` for anyone but the reviewer
    deciding): redacted again with the current filter, so the comparison is with what was read."""
    return redact(call.arguments_redacted)


def path_text(path: Path) -> str:
    """``recipient.token``, ``items[0]``; the top level is ``arguments``."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text or "arguments"


def merged_amendment(amended: str, parsed: dict[str, Any], call: PendingToolCall) -> str:
    """The arguments to store and run for the reviewer's ``amended`` text (already parsed as ``parsed``):
    the text itself when no marker is in it, else the merge described in the module. Raises
    AmendmentRefused."""
    if not _holds_marker(parsed):
        return amended
    merged = _merge(parsed, _decoded(shown_arguments(call)), _decoded(call.arguments_raw), ())
    return json.dumps(merged, ensure_ascii=False)


def _merge(amended: Any, shown: Any, original: Any, path: Path) -> Any:
    if shown is not _MISSING and original is not _MISSING and _same(amended, shown):
        return original
    if not _holds_marker(amended):
        return amended
    if isinstance(amended, dict) and isinstance(shown, dict):
        originals = original if isinstance(original, dict) else {}
        merged = {}
        for key, value in amended.items():
            if REDACTED in key:
                raise AmendmentRefused((*path, key), NEVER_SHOWN)
            merged[key] = _merge(value, shown.get(key, _MISSING), originals.get(key, _MISSING), (*path, key))
        return merged
    if isinstance(amended, list) and isinstance(shown, list):
        originals = original if isinstance(original, list) else []
        return [
            _merge(
                value,
                shown[index] if index < len(shown) else _MISSING,
                originals[index] if index < len(originals) else _MISSING,
                (*path, index),
            )
            for index, value in enumerate(amended)
        ]
    raise AmendmentRefused(path, PARTLY_EDITED if _holds_marker(shown) else NEVER_SHOWN)


def _holds_marker(value: Any) -> bool:
    if isinstance(value, str):
        return REDACTED in value
    if isinstance(value, dict):
        return any(REDACTED in key or _holds_marker(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_holds_marker(item) for item in value)
    return False


def _same(left: Any, right: Any) -> bool:
    """JSON equality, strict about types (``true`` is not ``1``, ``1`` is not ``1.0``), key order aside."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def _decoded(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _MISSING
