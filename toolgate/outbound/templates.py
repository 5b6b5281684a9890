"""Placeholders such as ``{memory.current.payments.body.id}``: the one renderer of every template.

Rules of ``render``:

- ``{root.key.key…}`` is a placeholder only when ``root`` is one of ``memory``, ``properties``,
  ``context``, ``args``; any other text in braces (JSON in a body, ``{unknown.x}``) is left alone.
- A path is followed through dicts by key and through lists by index; a missing path renders as ``""``.
- Strings render as themselves, ``None`` as ``""``, booleans as ``true``/``false``, dicts and lists as
  compact JSON, other values with ``str``.
- ``{{…}}`` (with no braces inside) is an escape: it renders as ``{…}`` without substitution, so
  ``{{memory.current.x}}`` yields the literal text ``{memory.current.x}``. A lone ``{{`` or ``}}``
  (as at the end of nested JSON) is left alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

TEMPLATE_ROOTS = ("memory", "properties", "context", "args")

_MISSING = object()
MISSING = _MISSING  # what lookup_path returns for a path that leads nowhere
_TOKEN = re.compile(
    r"\{\{(?P<escaped>[^{}]*)\}\}"
    r"|\{(?P<path>(?:" + "|".join(TEMPLATE_ROOTS) + r")(?:\.[\w\-]+)*)\}"
)


def lookup_path(data: Any, path: list[str]) -> Any:
    """Follow ``path`` through nested dicts (by key) and lists (by index); ``_MISSING`` when absent."""
    current = data
    for key in path:
        if isinstance(current, dict) and key in current:
            current = current[key]
        elif isinstance(current, list) and key.isdigit() and int(key) < len(current):
            current = current[int(key)]
        else:
            return _MISSING
    return current


def value_as_text(value: Any) -> str:
    """How a looked-up value appears inside rendered text."""
    if value is _MISSING or value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def render(template: str, data: dict[str, Any], *, escape: Callable[[str], str] | None = None) -> str:
    """Replace every placeholder in ``template`` with its value from ``data`` (see module rules).

    ``escape``, when given, is applied to each substituted value (e.g. percent-encoding in a URL path)
    and never to the literal text around it.
    """

    def substitute(match: re.Match[str]) -> str:
        if match.group("escaped") is not None:
            return "{" + match.group("escaped") + "}"
        text = value_as_text(lookup_path(data, match.group("path").split(".")))
        return escape(text) if escape else text

    return _TOKEN.sub(substitute, template)
