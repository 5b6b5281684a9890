"""Binding an approval to the exact HTTP request that will run (http tools).

At gate time every gated http call is resolved with the same builder execution uses, without sending
anything and without writing memory. The approver sees a redacted **preview**; the server keeps a
**fingerprint**: a keyed HMAC (``HITL_PINNING_KEY``) over a canonical form that length-prefixes every
field name and value — upper-cased method, the raw URI, each query value as its own field (repeated
parameters stay distinct, an empty value differs from an absent one), headers lower-cased and sorted
with their *redacted* values (so approval by another person than the one whose turn paused, whose
``${caller:token}`` differs, is the normal case and passes), and the *raw* body (so two different secrets
give two fingerprints). The fingerprint is never returned by any surface.

Before an approved pinned call runs it is resolved again and compared. A mismatch, a tool that
disappeared, a re-resolution that fails, or a call that became unpinnable meanwhile refuses the call
(fail closed), and so does an approved call whose request could not be resolved when approval was
asked (the approver saw no request). An unpinned call is approved on name and arguments alone — nothing is refused on a
comparison that was never sound — and an amended call is not checked: the reviewer wrote it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from typing import Any

from django.conf import settings

from toolgate.http_requests import BuiltRequest, without_secrets
from toolgate.models import UNRESOLVED_FINGERPRINT, PendingToolCall
from toolgate.redaction import REDACTED, redact, redact_header_value, redact_query_pairs, redact_uri
from toolgate.tools import Tool, ToolContext, ToolSet

logger = logging.getLogger(__name__)

PREVIEW_BODY_MAX_BYTES = 8192
GONE = "the tool is no longer available to re-check the approved request"
UNPINNABLE_NOW = "the request could no longer be resolved for comparison"
CANNOT_VERIFY = "the request could not be re-resolved before execution"
CHANGED = "the request changed after it was approved"
UNRESOLVED_AT_GATE = "the request could not be resolved when approval was asked, so nobody saw what would run"


def _key() -> bytes:
    configured = getattr(settings, "HITL_PINNING_KEY", "") or ""
    if configured:
        return configured.encode("utf-8")
    return hmac.new(settings.SECRET_KEY.encode("utf-8"), b"hitl-request-pinning", hashlib.sha256).digest()


def _field(name: str, value: bytes) -> bytes:
    encoded = name.encode("utf-8")
    return b"%d:%s%d:%s\n" % (len(encoded), encoded, len(value), value)


def fingerprint_headers(built: BuiltRequest, caller_token: str) -> list[tuple[str, str]]:
    """Lower-cased, sorted, redacted by name and value; the live caller token never counts."""
    pairs = []
    for name, value in built.headers_to_send().items():
        if caller_token:
            value = value.replace(caller_token, REDACTED)
        pairs.append((name.lower(), redact_header_value(name, value)))
    return sorted(pairs)


def canonical_request(built: BuiltRequest, caller_token: str = "") -> bytes:  # nosec B107  # an empty default caller token, not a password
    """The fingerprinted form of what ``built.outgoing()`` sends (its target, headers and body)."""
    uri, query = built.target()
    parts = [_field("method", built.method.upper().encode("utf-8")), _field("uri", uri.encode("utf-8"))]
    by_name: dict[str, list[str]] = {}
    for name, value in query:
        by_name.setdefault(name, []).append(value)
    for name in sorted(by_name):
        for index, value in enumerate(by_name[name]):
            parts.append(_field(f"query.{name}[{index}]", value.encode("utf-8")))
    for name, value in fingerprint_headers(built, caller_token):
        parts.append(_field(f"header.{name}", value.encode("utf-8")))
    parts.append(_field("body", built.body or b""))
    return b"".join(parts)


def request_fingerprint(built: BuiltRequest, caller_token: str = "") -> str:  # nosec B107  # an empty default caller token, not a password
    return hmac.new(_key(), canonical_request(built, caller_token), hashlib.sha256).hexdigest()


def request_preview(built: BuiltRequest, caller_token: str = "") -> dict[str, Any]:  # nosec B107  # an empty default caller token, not a password
    return without_secrets(_preview(built, caller_token), built.secrets_used)


def _preview(built: BuiltRequest, caller_token: str) -> dict[str, Any]:
    body_text = (built.body or b"").decode("utf-8", errors="replace")
    body = redact(body_text.replace(caller_token, REDACTED) if caller_token else body_text)
    data = body.encode("utf-8")
    truncated = len(data) > PREVIEW_BODY_MAX_BYTES
    if truncated:
        body = data[:PREVIEW_BODY_MAX_BYTES].decode("utf-8", errors="ignore")
    uri, pairs = built.target()
    query: dict[str, list[str]] = {}
    for name, value in redact_query_pairs(pairs):
        query.setdefault(name, []).append(value)
    return {
        "method": built.method.upper(),
        "uri": redact_uri(uri),
        "queryParams": {name: ", ".join(values) for name, values in sorted(query.items())},
        "headers": dict(fingerprint_headers(built, caller_token)),
        "body": body,
        "bodyTruncated": truncated,
    }


def _arguments(text: str) -> dict[str, Any]:
    value = json.loads(text or "{}")
    return value if isinstance(value, dict) else {}


def pin(tool: Tool | None, arguments_text: str, context: ToolContext) -> tuple[str, dict[str, Any] | None]:
    """(fingerprint, "" when unpinnable; preview, None when there is nothing to resolve).

    Fail closed: an http call whose request cannot be resolved now gets UNRESOLVED_FINGERPRINT, and is
    refused if approved (``request_changed_reason``): approving it would approve a request nobody saw.
    """
    if tool is None or tool.resolve is None:
        return "", None
    try:
        built = tool.resolve(_arguments(arguments_text), context)
        preview = request_preview(built, context.caller_token)
    except Exception as exc:
        logger.warning(
            "could not resolve the request of %s for its preview: %s", tool.name, type(exc).__name__
        )
        return UNRESOLVED_FINGERPRINT, None
    if tool.unpinnable_reason:
        return "", preview
    return request_fingerprint(built, context.caller_token), preview


def request_changed_reason(
    call: PendingToolCall, amended: str | None, toolset: ToolSet, context: ToolContext
) -> str | None:
    """None to proceed; otherwise why the approved call must not run (see module rules)."""
    if not call.request_fingerprint or amended is not None:
        return None
    if call.request_fingerprint == UNRESOLVED_FINGERPRINT:
        return UNRESOLVED_AT_GATE
    tool = toolset.tools.get(call.tool_name)
    if tool is None or tool.resolve is None:
        return GONE
    if tool.unpinnable_reason:
        return UNPINNABLE_NOW
    try:
        built = tool.resolve(_arguments(call.arguments_raw), context)
    except Exception:
        return CANNOT_VERIFY
    if not hmac.compare_digest(request_fingerprint(built, context.caller_token), call.request_fingerprint):
        return CHANGED
    return None
