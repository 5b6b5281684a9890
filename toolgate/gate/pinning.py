"""Binding an approval to the exact HTTP request that will run (http tools).

At gate time every gated http call is resolved with the same builder execution uses, without sending
anything and without writing memory. The reviewer is shown the request's **view**
(``toolgate.outbound.request_views``): every byte as it will be sent, each value the service injects
(``${vault:…}``, ``${env:…}``, ``${caller:token}``) shown as its reference. The server keeps a
**fingerprint**: a keyed HMAC (``HITL_PINNING_KEY``) over a canonical form of that view that
length-prefixes every field name and value — upper-cased method, the URI as sent, each query value as
its own field (repeated parameters stay distinct, an empty value differs from an absent one), headers
lower-cased and sorted, the body — followed by the value of every injected ``${vault:…}`` and
``${env:…}`` reference in order. So the fingerprint changes when any byte the model controls changes
(a credential-shaped value in a header included) and when a secret changes, and not when the
``${caller:token}`` of the person approving differs from the one whose turn paused (the normal case).
The fingerprint is never returned by any surface.

Before an approved pinned call runs it is resolved again and compared, and the request each attempt
sends is compared once more just before it leaves (``pinned_request_check``). A mismatch, a tool that
disappeared, a re-resolution that fails, or a call that became unpinnable meanwhile refuses the call
(fail closed), and so does an approved call whose request could not be resolved when approval was
asked (the reviewer saw no request) or whose body was too large to show in full. An unpinned call is
approved on name and arguments alone — nothing is refused on a comparison that was never sound — and
an amended call is not checked: the reviewer wrote it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from typing import Any

from django.conf import settings

from toolgate.gate.tools import Tool, ToolContext, ToolSet
from toolgate.models import UNRESOLVED_FINGERPRINT, PendingToolCall
from toolgate.outbound.http_requests import BuiltRequest

logger = logging.getLogger(__name__)

GONE = "the tool is no longer available to re-check the approved request"
UNPINNABLE_NOW = "the request could no longer be resolved for comparison"
CANNOT_VERIFY = "the request could not be re-resolved before execution"
CHANGED = "the request changed after it was approved"
UNRESOLVED_AT_GATE = "the request could not be resolved when approval was asked, so nobody saw what would run"
NOT_SHOWN_IN_FULL = (
    "the request was too large to show the reviewer in full, so nobody saw all of what would run"
)


def pinning_key() -> bytes:
    """The key of every request fingerprint (``HITL_PINNING_KEY``, else derived from ``SECRET_KEY``)."""
    configured = getattr(settings, "HITL_PINNING_KEY", "") or ""
    if configured:
        return configured.encode("utf-8")
    return hmac.new(settings.SECRET_KEY.encode("utf-8"), b"hitl-request-pinning", hashlib.sha256).digest()


def _field(name: str, value: bytes) -> bytes:
    encoded = name.encode("utf-8")
    return b"%d:%s%d:%s\n" % (len(encoded), encoded, len(value), value)


def canonical_request(built: BuiltRequest) -> bytes:
    """The fingerprinted form of ``built`` (see module rules)."""
    view = built.view()
    parts = [_field("method", view.method.encode("utf-8")), _field("uri", view.uri.encode("utf-8"))]
    by_name: dict[str, list[str]] = {}
    for name, value in view.query:
        by_name.setdefault(name, []).append(value)
    for name in sorted(by_name):
        for index, value in enumerate(by_name[name]):
            parts.append(_field(f"query.{name}[{index}]", value.encode("utf-8")))
    for name, value in sorted((name.lower(), value) for name, value in view.headers):
        parts.append(_field(f"header.{name}", value.encode("utf-8")))
    parts.append(_field("body", view.body))
    secrets = [item for item in built.injected if not item.is_caller_token]
    for index, item in enumerate(secrets):
        parts.append(_field(f"injected[{index}]", item.value.encode("utf-8")))
    return b"".join(parts)


def request_fingerprint(built: BuiltRequest) -> str:
    return hmac.new(pinning_key(), canonical_request(built), hashlib.sha256).hexdigest()


def request_preview(built: BuiltRequest) -> dict[str, Any]:
    """What the pending call keeps to show: the request's view (never a secret; see module rules)."""
    return built.view().as_preview()


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
        preview = request_preview(built)
    except Exception as exc:
        logger.warning(
            "could not resolve the request of %s for its preview: %s", tool.name, type(exc).__name__
        )
        return UNRESOLVED_FINGERPRINT, None
    if tool.unpinnable_reason:
        return "", preview
    return request_fingerprint(built), preview


def request_changed_reason(
    call: PendingToolCall, amended: str | None, toolset: ToolSet, context: ToolContext
) -> str | None:
    """None to proceed; otherwise why the approved call must not run (see module rules)."""
    if amended is not None:
        return None
    if (call.request_preview or {}).get("bodyTruncated"):
        return NOT_SHOWN_IN_FULL
    if not call.request_fingerprint:
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
    if not hmac.compare_digest(request_fingerprint(built), call.request_fingerprint):
        return CHANGED
    return None


def pinned_request_check(call: PendingToolCall) -> Any:
    """For an approved pinned call: a check of each request about to be sent, refusing any that is not
    byte for byte the approved one (None for a call that is not pinned)."""
    if not call.request_pinned:
        return None

    def check(built: BuiltRequest) -> dict[str, Any] | None:
        if hmac.compare_digest(request_fingerprint(built), call.request_fingerprint):
            return None
        return {"status": "NOT_EXECUTED", "reason": CHANGED}

    return check
