"""What a request body may carry. Checked where the body is parsed, so a bad one is a 400 before
anything is read from or written to the database, and nothing is consumed.

Every REST body passes through here (common.parsers); so do the values that reach the database
by another door: a decision's note and amended arguments on every surface, agent documents from a ZIP,
secret values, audit filters.
"""

from __future__ import annotations

import json
import math
from typing import Any

from django.conf import settings

from common.errors import BadRequest

MAX_JSON_DEPTH = 64
MAX_REPORTED = 20  # a body full of NULs gets a readable answer, not one error per character
_SHOWN_CHARS = 64


def unstorable_text_problem(text: str) -> str | None:
    """Text that PostgreSQL cannot store is refused at the door.

    PostgreSQL's ``text`` and ``jsonb`` cannot hold U+0000 (NUL), and UTF-8 cannot encode a lone
    surrogate (U+D800..U+DFFF without its pair), which JSON can still carry as an escape
    (``"\\ud800"``). Either one reaching a write fails in the middle of a turn or a decision, after
    other rows were touched. Returns why ``text`` is refused, or None when it can be stored.
    """
    if "\x00" in text:
        return "contains a NUL character (U+0000), which cannot be stored"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"contains a lone surrogate (U+{ord(text[exc.start]):04X}), which is not valid Unicode text "
            "and cannot be stored"
        )
    return None


def unstorable_number_problem(number: float) -> str | None:
    """A number too large for a float (``1e400`` parses as infinity) cannot be stored in jsonb."""
    return None if math.isfinite(number) else "is a number too large to store"


def canonical_json_bytes(value: Any) -> int:
    """The size of ``value`` as canonical JSON: keys sorted, no spaces, UTF-8 (not ``\\u`` escapes), so the
    same value has one size however the client spelled it."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8", "surrogatepass"))


def context_size_problem(context: Any) -> str | None:
    """A turn's ``context`` is stored with the conversation and with every step it takes, so its size is
    bounded: at most ``HITL_CONTEXT_MAX_BYTES`` bytes of canonical JSON (``canonical_json_bytes``; 0: no
    bound). Returns why ``context`` is refused, or None."""
    limit = settings.HITL_CONTEXT_MAX_BYTES
    if limit <= 0 or not context:
        return None
    size = canonical_json_bytes(context)
    if size <= limit:
        return None
    return f"is {size} bytes of JSON, over the limit of {limit} bytes (HITL_CONTEXT_MAX_BYTES)"


def body_errors(value: Any, *, field: str = "", max_depth: int = MAX_JSON_DEPTH) -> list[dict[str, str]]:
    """Every place of a parsed JSON value that is refused before anything is written.

    Text that PostgreSQL cannot store (``unstorable_text_problem``; dict keys too), numbers it cannot
    store (``unstorable_number_problem``), and nesting deeper than ``max_depth`` levels (an object or
    array is one level), which exists only to exhaust a recursion somewhere (Python's JSON decoder,
    our walkers, jsonb). One iterative walk, so any depth is safe. Each error names its place as
    ``field`` extended by ``.key`` and ``[index]`` (``input``, ``context.customer.name``,
    ``toolDecisions.call-1.note``); a bad character is shown escaped, never echoed.
    """
    errors: list[dict[str, str]] = []
    pending: list[tuple[str, Any, int]] = [(field, value, 0)]
    while pending and len(errors) < MAX_REPORTED:
        path, item, depth = pending.pop()
        if isinstance(item, str):
            problem = unstorable_text_problem(item)
        elif isinstance(item, float):
            problem = unstorable_number_problem(item)
        elif isinstance(item, dict | list | tuple):
            if depth >= max_depth:
                errors.append({"field": field, "message": f"nested deeper than {max_depth} levels"})
                break
            pending.extend(reversed(_children(errors, path, item, depth + 1)))
            continue
        else:
            continue
        if problem is not None:
            errors.append({"field": path, "message": problem})
    return errors[:MAX_REPORTED]


def _children(errors: list[dict[str, str]], path: str, item: Any, depth: int) -> list[tuple[str, Any, int]]:
    if not isinstance(item, dict):
        return [(f"{path}[{index}]", child, depth) for index, child in enumerate(item)]
    children = []
    for key, child in item.items():
        key_text = str(key)
        child_path = f"{path}.{shown_text(key_text)}" if path else shown_text(key_text)
        problem = unstorable_text_problem(key_text)
        if problem is not None:
            errors.append({"field": child_path, "message": f"the key {problem}"})
        children.append((child_path, child, depth))
    return children


def refuse_bad_body(value: Any, *, field: str = "") -> None:
    """Raise a 400 naming every place of ``value`` that ``body_errors`` refuses."""
    errors = body_errors(value, field=field)
    if errors:
        detail = "; ".join(f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in errors)
        raise BadRequest(detail, errors=errors)


def shown_text(text: str, *, limit: int = _SHOWN_CHARS) -> str:
    """``text`` as an error message may quote it: cut after ``limit`` characters, and unprintable
    characters (NUL, lone surrogates) escaped as ``\\u0000``, so the answer itself can always be sent."""
    shown = "".join(char if char.isprintable() else f"\\u{ord(char):04x}" for char in text[:limit])
    return shown + "…" if len(text) > limit else shown
