"""The exact HTTP request an agent will send if approved: checked, fingerprinted, shown.

A pinned request is ``{"method", "url", "headers"?, "body"?, "secretHeaders"?}``. The reviewer is shown
it exactly as it will be sent, except the values of the headers the caller names in ``secretHeaders``
(an ``Authorization`` header, an API key): those are hidden by name, never by the shape of a value, and
never stored. The server keeps a **fingerprint**: a keyed HMAC (``HITL_PINNING_KEY``) over a canonical
form that length-prefixes every field: the upper-cased method, the URL as given, each header (name
lower-cased, sorted, repeated names kept in order) and the body; a secret header's value enters as its
own keyed digest, which is all the server keeps of it. So any changed byte (a secret included) changes
the fingerprint, and a reviewer's edit of the visible parts can be fingerprinted without the secret.
Neither the fingerprint nor a digest is ever returned by any surface.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from common.field_errors import FieldError
from toolgate.gate import pinning_key

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
URL_MAX = 2048
BODY_MAX_BYTES = 256 * 1024
HEADERS_MAX = 50
HEADER_VALUE_MAX = 8192
HIDDEN = "[hidden: marked secret by the agent]"
REQUEST_KEYS = ("method", "url", "headers", "body", "secretHeaders")
AMENDABLE_KEYS = ("method", "url", "headers", "body")
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # RFC 9110 field-name characters
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # control characters, CR and LF included (tab allowed)


@dataclass(frozen=True)
class PinnedRequest:
    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: str | None
    secret_headers: frozenset[str]  # lower-cased names

    def is_secret(self, name: str) -> bool:
        return name.lower() in self.secret_headers


def request_errors(value: Any, field: str, *, secrets_allowed: bool = True) -> list[FieldError]:
    """Every problem of a request object at ``field`` (``request``, ``amendedRequest``), each by its path."""
    if not isinstance(value, dict):
        return [FieldError(field, "must be an object with method, url, headers and body")]
    allowed = REQUEST_KEYS if secrets_allowed else AMENDABLE_KEYS
    errors = [
        FieldError(f"{field}.{key}", f"unknown field (allowed: {', '.join(allowed)})")
        for key in value
        if key not in allowed
    ]
    method = value.get("method")
    if not isinstance(method, str) or method.upper() not in METHODS:
        errors.append(FieldError(f"{field}.method", f"must be one of {', '.join(METHODS)}"))
    errors += _url_errors(value.get("url"), f"{field}.url")
    headers = value.get("headers")
    if headers is not None:
        errors += _header_errors(headers, f"{field}.headers")
    body = value.get("body")
    if body is not None:
        if not isinstance(body, str):
            errors.append(
                FieldError(f"{field}.body", "must be the body as text (a JSON body as its JSON text)")
            )
        elif len(body.encode("utf-8", "surrogatepass")) > BODY_MAX_BYTES:
            errors.append(FieldError(f"{field}.body", f"exceeds {BODY_MAX_BYTES} bytes"))
        elif "\x00" in body or _has_lone_surrogate(body):
            errors.append(FieldError(f"{field}.body", "must be text without NUL or lone surrogates"))
    secret_names = value.get("secretHeaders")
    if secret_names is not None:
        errors += _secret_header_errors(secret_names, headers, f"{field}.secretHeaders")
    return errors


def _url_errors(url: Any, field: str) -> list[FieldError]:
    if not isinstance(url, str) or not url:
        return [FieldError(field, "required: the absolute http or https URL the request goes to")]
    if len(url) > URL_MAX:
        return [FieldError(field, f"exceeds {URL_MAX} characters")]
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        return [FieldError(field, "must not contain whitespace or control characters")]
    try:
        parts = urlsplit(url)
    except ValueError:
        return [FieldError(field, "is not a URL")]
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return [FieldError(field, "must be an absolute http or https URL")]
    if parts.username or parts.password:
        return [FieldError(field, "must not carry credentials: send them in a header marked secret")]
    return []


def _header_errors(headers: Any, field: str) -> list[FieldError]:
    if not isinstance(headers, dict):
        return [FieldError(field, "must be an object of header name to value")]
    if len(headers) > HEADERS_MAX:
        return [FieldError(field, f"at most {HEADERS_MAX} headers")]
    errors = []
    seen: set[str] = set()
    for name, value in headers.items():
        path = f"{field}.{name}"
        if not _TOKEN.match(name):
            errors.append(FieldError(path, "is not a valid header name"))
        elif name.lower() in seen:
            errors.append(FieldError(path, "is given twice (header names are case-insensitive)"))
        seen.add(name.lower())
        if not isinstance(value, str):
            errors.append(FieldError(path, "must be a string"))
        elif len(value) > HEADER_VALUE_MAX or _BAD_VALUE.search(value) or _has_lone_surrogate(value):
            errors.append(
                FieldError(path, f"must be at most {HEADER_VALUE_MAX} characters without CR, LF or NUL")
            )
    return errors


def _secret_header_errors(names: Any, headers: Any, field: str) -> list[FieldError]:
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return [FieldError(field, "must be a list of header names")]
    present = {name.lower() for name in headers} if isinstance(headers, dict) else set()
    return [
        FieldError(field, f"'{name[:60]}' is not one of the request's headers")
        for name in names
        if name.lower() not in present
    ]


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parsed(value: dict[str, Any]) -> PinnedRequest:
    """A request ``request_errors`` found nothing wrong with."""
    headers = value.get("headers") or {}
    return PinnedRequest(
        method=value["method"].upper(),
        url=value["url"],
        headers=tuple(headers.items()),
        body=value.get("body"),
        secret_headers=frozenset(name.lower() for name in value.get("secretHeaders") or ()),
    )


def _key_digest(label: bytes, value: str) -> str:
    return hmac.new(pinning_key(), label + b"\n" + value.encode("utf-8"), hashlib.sha256).hexdigest()


def secret_digests(request: PinnedRequest) -> dict[str, str]:
    """The keyed digest of each secret header's value, by lower-cased name: all the server keeps of it."""
    return {
        name.lower(): _key_digest(b"secret-header:" + name.lower().encode("utf-8"), value)
        for name, value in request.headers
        if request.is_secret(name)
    }


def _field(name: str, value: bytes) -> bytes:
    encoded = name.encode("utf-8")
    return b"%d:%s%d:%s\n" % (len(encoded), encoded, len(value), value)


def _canonical(method: str, url: str, headers: Iterable[tuple[str, str]], body: str | None) -> bytes:
    parts = [_field("method", method.encode("utf-8")), _field("url", url.encode("utf-8"))]
    for name, value in sorted(((name.lower(), value) for name, value in headers), key=lambda pair: pair[0]):
        parts.append(_field(f"header.{name}", value.encode("utf-8")))
    parts.append(_field("body", b"" if body is None else body.encode("utf-8")))
    parts.append(_field("hasBody", b"1" if body is not None else b"0"))
    return b"".join(parts)


def fingerprint(request: PinnedRequest, digests: dict[str, str]) -> str:
    """The keyed fingerprint of ``request``, each secret header's value entering as its ``digests`` entry."""
    headers = [
        (name, "secret:" + digests.get(name.lower(), "")) if request.is_secret(name) else (name, value)
        for name, value in request.headers
    ]
    canonical = _canonical(request.method, request.url, headers, request.body)
    return hmac.new(pinning_key(), canonical, hashlib.sha256).hexdigest()


def preview(request: PinnedRequest) -> dict[str, Any]:
    """The request as the reviewer sees it: every byte, secret header values named and hidden."""
    return {
        "method": request.method,
        "url": request.url,
        "headers": {name: HIDDEN if request.is_secret(name) else value for name, value in request.headers},
        "body": request.body,
        "secretHeaders": [name for name, _ in request.headers if request.is_secret(name)],
    }


def from_preview(shown: dict[str, Any]) -> PinnedRequest:
    """The request a stored preview shows (secret values hidden: fingerprint it with the stored digests)."""
    return PinnedRequest(
        method=shown["method"],
        url=shown["url"],
        headers=tuple((shown.get("headers") or {}).items()),
        body=shown.get("body"),
        secret_headers=frozenset(name.lower() for name in shown.get("secretHeaders") or ()),
    )


def amended(shown: dict[str, Any], amendment: dict[str, Any]) -> PinnedRequest:
    """The pinned request with a reviewer's amendment (method, url, body, visible headers) applied; the
    secret headers stay as the agent sent them (the reviewer never saw them)."""
    original = from_preview(shown)
    visible = amendment.get("headers")
    if visible is None:
        headers = original.headers
    else:
        secrets = [(name, value) for name, value in original.headers if original.is_secret(name)]
        headers = tuple(secrets) + tuple(visible.items())
    return PinnedRequest(
        method=amendment.get("method", original.method).upper(),
        url=amendment.get("url", original.url),
        headers=headers,
        body=amendment["body"] if "body" in amendment else original.body,
        secret_headers=original.secret_headers,
    )


def amendment_errors(shown: dict[str, Any], amendment: Any, field: str) -> list[FieldError]:
    """A reviewer's ``amendedRequest``: only the visible parts, each valid; no secret header named."""
    if not isinstance(amendment, dict) or not amendment:
        return [FieldError(field, "must be an object with the parts to change: method, url, headers, body")]
    whole = {**{k: v for k, v in shown.items() if k in ("method", "url")}, **amendment}
    errors = request_errors(whole, field, secrets_allowed=False)
    secret = {name.lower() for name in shown.get("secretHeaders") or ()}
    for name in amendment.get("headers") or {} if isinstance(amendment.get("headers"), dict) else ():
        if name.lower() in secret:
            errors.append(
                FieldError(f"{field}.headers.{name}", "is marked secret by the agent and cannot be edited")
            )
    return errors


def claimed_fingerprint(claimed: PinnedRequest, approved_shown: dict[str, Any]) -> str:
    """The fingerprint of the request an agent claims to send, its secret headers being those the
    approved request marks (whatever the claim says)."""
    secret = frozenset(name.lower() for name in approved_shown.get("secretHeaders") or ())
    as_approved = PinnedRequest(claimed.method, claimed.url, claimed.headers, claimed.body, secret)
    return fingerprint(as_approved, secret_digests(as_approved))


def same_fingerprint(left: str, right: str) -> bool:
    return bool(left) and hmac.compare_digest(left, right)
