"""The pattern language of tool approvals: validation, matching, and the addresses a call is known by.

``*`` is the only wildcard and matches any run of characters (the empty run too); every other
character is a literal, compared case-sensitively, and a pattern must match the whole address. A
pattern may carry a source prefix (``mcp:read_*``) or, for http tools, an endpoint
(``http.post:/agentstore/agents``); a bare pattern (``delete_*``) matches the tool name.

Matching is linear in the address's length: the pattern is split on ``*`` and the pieces are found
left to right, never through a backtracking regular expression (``*`` -> ``.*`` backtracks for
seconds on nine stars against a 60-character name). ``fnmatch`` is a different language: there
``?`` and ``[`` are wildcards, here they are not even legal characters.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from urllib.parse import unquote, urlsplit

from common.edit_distance import near_miss
from common.field_errors import utf16_length
from toolgate.gate.tools import SOURCES

PATTERN_MAX = 256
HTTP_METHODS = ("get", "post", "put", "patch", "delete", "head", "options")
_ALLOWED = re.compile(r"[A-Za-z0-9_\-.:*/{}]+")
_METHOD_PREFIXES = tuple(f"http.{method}" for method in HTTP_METHODS)


class GlobPattern:
    """A compiled pattern; ``matches`` is a full, case-sensitive match in time linear in the text."""

    __slots__ = ("pattern", "_first", "_middle", "_last", "_has_star")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        pieces = pattern.split("*")
        self._has_star = len(pieces) > 1
        self._first = pieces[0]
        self._last = pieces[-1] if self._has_star else ""
        self._middle = tuple(piece for piece in pieces[1:-1] if piece)

    def matches(self, text: str) -> bool:
        if not self._has_star:
            return text == self._first
        first, last = self._first, self._last
        end = len(text) - len(last)
        if end < len(first) or not text.startswith(first) or not text.endswith(last):
            return False
        # Leftmost placement of each middle piece leaves the most room for the next: if any
        # placement matches, this one does.
        position = len(first)
        for piece in self._middle:
            found = text.find(piece, position, end)
            if found < 0:
                return False
            position = found + len(piece)
        return True

    def __repr__(self) -> str:
        return f"GlobPattern({self.pattern!r})"


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> GlobPattern:
    return GlobPattern(pattern)


def validate_pattern(pattern: object) -> str | None:
    """Why ``pattern`` is refused, or None when it is a valid pattern (the first check that fails)."""
    if pattern is None or (isinstance(pattern, str) and not pattern.strip()):
        return "pattern must not be blank"
    if not isinstance(pattern, str):
        return f"pattern must be a string, got {_json_type(pattern)}"
    if utf16_length(pattern) > PATTERN_MAX:
        return f"pattern exceeds {PATTERN_MAX} characters"
    if not _ALLOWED.fullmatch(pattern):
        return (
            f"pattern '{pattern}' contains illegal characters — allowed: A-Za-z0-9_-.:* plus / {{ }} "
            "for endpoint paths (tool names never contain spaces)"
        )
    if pattern.startswith(":") or pattern.endswith(":"):
        return (
            f"pattern '{pattern}' must not start or end with a colon — the colon separates a source "
            "prefix (e.g. 'mcp:read_*') from the tool name"
        )
    if ":" not in pattern:
        return None
    prefix, target = pattern.split(":", 1)
    method_qualified = prefix in _METHOD_PREFIXES
    if not (method_qualified or prefix in SOURCES or "*" in prefix):
        return _unknown_prefix(prefix, pattern)
    if target.startswith("/") and not method_qualified:
        prefix_glob = GlobPattern(prefix)
        if not any(prefix_glob.matches(method_prefix) for method_prefix in _METHOD_PREFIXES):
            return (
                f"pattern '{pattern}' targets an endpoint path but its prefix can never match one, so "
                "the pattern matches nothing — endpoint patterns look like 'http.post:<target>'"
            )
    if method_qualified and not target.startswith(("/", "*")):
        return (
            f"pattern '{pattern}' is method-qualified, so its target is an endpoint path and must begin "
            f"with '/' (or '*') — did you mean '{prefix}:/{target}'?"
        )
    return None


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {list: "array", dict: "object"}.get(type(value), type(value).__name__)


def _unknown_prefix(prefix: str, pattern: str) -> str:
    suggestion = near_miss(prefix, SOURCES)
    hint = f" — did you mean '{suggestion}:'?" if suggestion else ""
    return (
        f"unknown tool source prefix '{prefix}:' in pattern '{pattern}'{hint} — known sources: "
        f"{', '.join(SOURCES)}; only the http source may be qualified by method, e.g. 'http.post:'"
    )


def call_addresses(source: str, name: str | None, endpoint: str | None) -> list[str]:
    """Every address a call is known by, most specific first.

    ``http.<method>:<path>`` (http tools with an endpoint, given as ``"post:/path"``), then
    ``<source>:<name>`` (known sources only), then the bare ``<name>`` — so a tool whose source is
    unknown still matches bare-name patterns. A call without a name has no address.
    """
    if name is None:
        return []
    addresses: list[str] = []
    if source == "http" and endpoint:
        address = _endpoint_address(endpoint)
        if address is not None:
            addresses.append(address)
    if source in SOURCES:
        addresses.append(f"{source}:{name}")
    addresses.append(name)
    return addresses


def _endpoint_address(endpoint: str) -> str | None:
    method, separator, path = endpoint.partition(":")
    if not separator or not method.strip():
        return None
    return f"http.{method.strip().lower()}:{normalise_endpoint_path(path)}"


def normalise_endpoint_path(path: str) -> str:
    """The path as patterns see it: trimmed, an absolute URL reduced to its path, always with a
    leading slash (``""`` -> ``/``, ``accounts`` -> ``/accounts``)."""
    path = path.strip()
    if path.lower().startswith(("http://", "https://")):
        try:
            path = urlsplit(path).path or "/"
        except ValueError:
            pass  # unparsable: matched as declared
    if not path:
        return "/"
    return path if path.startswith("/") else "/" + path


def first_match(patterns: list[str], addresses: list[str]) -> str | None:
    """The first pattern (in the patterns' order) that matches any address, or None.

    Pattern order beats address order: the result is the configured pattern that decided, so a
    gate reason names the first require pattern that applies. Blank patterns match nothing.
    """
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern.strip():
            continue
        glob = _compiled(pattern)
        if any(glob.matches(address) for address in addresses):
            return pattern
    return None


def request_addresses(method: str, path: str, base_path: str = "") -> list[str]:
    """The addresses of a request as it is sent: ``http.<method>:<path>`` for its whole path and for its
    path below ``targetServerUrl``'s (``base_path``), each as sent and percent-decoded. What the request
    reaches is judged here, whatever the declared template says (a value may fill a template's segment
    with anything that stays in that segment)."""
    paths = [path or "/"]
    if base_path and path.startswith(base_path + "/"):
        paths.append(path[len(base_path) :])
    forms: list[str] = []
    for candidate in paths:
        for form in (candidate, unquote(candidate)):
            address = f"http.{method.strip().lower()}:{form}"
            if address not in forms:
                forms.append(address)
    return forms


def first_match_folded(patterns: list[str], addresses: list[str]) -> str | None:
    """``first_match`` with patterns and addresses compared case-insensitively and in Unicode NFKC form:
    a target may route ``/V1/Admin`` or a full-width ``／admin`` as ``/v1/admin``, so a pattern that gates
    one gates them all (used for requireApproval only: folding widens what matches)."""
    folded = [_folded(address) for address in addresses]
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern.strip():
            continue
        if any(_compiled(_folded(pattern)).matches(address) for address in folded):
            return pattern
    return None


def _folded(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()
