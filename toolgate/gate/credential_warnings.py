"""Warnings for the reviewer: values the model chose that look like credentials.

Every view but the reviewer's hides such a value by its shape (``toolgate.outbound.redaction``). The reviewer
deciding a call is shown it as it will be sent instead — a prompt-injected model could otherwise hide a
recipient or an amount behind ``<REDACTED>`` — and told, per place, that it looks like a credential.
A place is named like an amendment path: ``arguments.to``, ``arguments.items[0].iban``, and
``request.url``, ``request.query.payee``, ``request.headers.x-api-key``, ``request.body`` for the request.
Values the service injects (``${vault:…}`` and the like) are shown by name and are never warned about.
"""

from __future__ import annotations

import json
from typing import Any

from toolgate.gate.amendments import Path, path_text
from toolgate.outbound.redaction import redact, redact_header_value, redact_json_value, redact_uri

MESSAGE = (
    "looks like a credential: shown as it will be sent (other views hide it); the model chose this "
    "value, so check it before approving"
)


def credential_warnings(arguments: str, preview: dict[str, Any] | None) -> list[dict[str, str]]:
    """``[{"field", "message"}]`` for each place of the call's arguments and request (see module rules)."""
    fields = [f"arguments{_suffix(path)}" for path in _argument_paths(arguments)]
    fields += [f"request.{place}" for place in _request_places(preview or {})]
    return [{"field": field, "message": MESSAGE} for field in fields]


def _suffix(path: Path) -> str:
    text = path_text(path)
    return "" if text == "arguments" else (text if text.startswith("[") else "." + text)


def _argument_paths(arguments: str) -> list[Path]:
    try:
        value = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        return [()] if redact(arguments) != arguments else []
    paths: list[Path] = []
    _changed(value, redact_json_value(value), (), paths)
    return paths


def _changed(original: Any, redacted: Any, path: Path, found: list[Path]) -> None:
    """The paths where the redaction filter changed a value (it keeps keys and list lengths)."""
    if isinstance(original, dict) and isinstance(redacted, dict):
        for key, item in original.items():
            _changed(item, redacted.get(key), (*path, str(key)), found)
    elif isinstance(original, list) and isinstance(redacted, list):
        for index, item in enumerate(original):
            _changed(item, redacted[index] if index < len(redacted) else None, (*path, index), found)
    elif original != redacted:
        found.append(path)


def _request_places(preview: dict[str, Any]) -> list[str]:
    places: list[str] = []
    uri = str(preview.get("uri") or "")
    if redact_uri(uri) != uri:
        places.append("url")
    for pair in preview.get("query") or []:
        if isinstance(pair, list | tuple) and len(pair) == 2:
            name, value = str(pair[0]), str(pair[1])
            if redact_header_value(name, value) != value:
                places.append(f"query.{name}")
    for name, value in (preview.get("headers") or {}).items():
        if redact_header_value(str(name), str(value)) != str(value):
            places.append(f"headers.{name}")
    body = str(preview.get("body") or "")
    if redact(body) != body:
        places.append("body")
    return places
