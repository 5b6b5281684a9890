"""A request as it will be sent, every byte the model controls included, each injected value by name.

Rules:

- A view is made from the one builder (``toolgate.outbound.http_requests.build_request``): the same template
  data, the same escaping, the same ``httpx.Request`` — only the injected values (``${vault:…}``,
  ``${env:…}``, ``${caller:token}``, see ``toolgate.outbound.secret_references``) were stand-ins, replaced by
  their references afterwards. So a view never holds a secret, and it differs from what is sent
  exactly where the service injected a value.
- ``url`` is the whole target as sent (scheme, host, path and query, encoded as on the wire); ``uri``
  the same without the query; ``query`` the decoded pairs in order (repeats kept); ``headers`` as
  sent (names as declared, plus the ``Content-Type`` the body implies); ``body`` the bytes.
- Nothing here is redacted by shape: a value the model chose that looks like a credential is a value
  the reviewer must see (``toolgate.gate.pause_details`` warns about it). Views for anyone else go
  through ``toolgate.outbound.redaction`` (``redacted_preview``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolgate.outbound.redaction import redact, redact_header_value, redact_uri

PREVIEW_BODY_MAX_BYTES = 262_144


@dataclass(frozen=True)
class RequestView:
    method: str
    url: str
    uri: str
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def as_preview(self) -> dict[str, Any]:
        """What a pending call keeps to show (``requestPreview``): the body up to
        ``PREVIEW_BODY_MAX_BYTES``, ``bodyTruncated`` beyond (such a call is refused if approved: nobody
        saw all of it)."""
        truncated = len(self.body) > PREVIEW_BODY_MAX_BYTES
        body = self.body[:PREVIEW_BODY_MAX_BYTES] if truncated else self.body
        query: dict[str, list[str]] = {}
        for name, value in self.query:
            query.setdefault(name, []).append(value)
        return {
            "method": self.method,
            "url": self.url,
            "uri": self.uri,
            "query": [[name, value] for name, value in self.query],
            "queryParams": {name: ", ".join(values) for name, values in sorted(query.items())},
            "headers": {
                name.lower(): value for name, value in sorted(self.headers, key=lambda h: h[0].lower())
            },
            "body": body.decode("utf-8", errors="ignore" if truncated else "replace"),
            "bodyTruncated": truncated,
        }


def request_view(
    method: str,
    *,
    url: str,
    uri: str,
    query: list[tuple[str, str]],
    headers: dict[str, str],
    body: bytes | None,
    named: Callable[[str], str] = lambda text: text,
) -> RequestView:
    """The view of a built request from what it sends (``url`` and ``uri`` as encoded on the wire, the
    decoded query pairs), each stand-in replaced through ``named``."""
    raw = body or b""
    return RequestView(
        method=method.upper(),
        url=named(url),
        uri=named(uri),
        query=tuple((named(name), named(value)) for name, value in query),
        headers=tuple((named(name), named(value)) for name, value in headers.items()),
        body=named(raw.decode("utf-8", errors="surrogateescape")).encode("utf-8", errors="surrogateescape"),
    )


def redacted_preview(preview: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stored ``requestPreview`` for everyone but the reviewer deciding it: every part through the one
    redaction filter (by shape, and by name for headers and query parameters). References stay legible."""
    if not preview:
        return None
    pairs = [
        tuple(pair)
        for pair in preview.get("query") or []
        if isinstance(pair, list | tuple) and len(pair) == 2
    ]
    shown = {
        "method": preview.get("method"),
        "uri": redact_uri(str(preview.get("uri") or "")),
        "queryParams": {
            name: redact_header_value(name, str(value))
            for name, value in (preview.get("queryParams") or {}).items()
        },
        "headers": {
            name: redact_header_value(name, str(value))
            for name, value in (preview.get("headers") or {}).items()
        },
        "body": redact(preview.get("body") or ""),
        "bodyTruncated": bool(preview.get("bodyTruncated")),
    }
    if "url" in preview:
        shown["url"] = redact_uri(str(preview.get("url") or ""))
        shown["query"] = [[name, redact_header_value(str(name), str(value))] for name, value in pairs]
    return shown
