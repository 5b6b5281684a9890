"""What the sync and async clients share: the bodies they send, the idempotency key, the pinned request
to and from ``httpx.Request``, and the answer of each call. No I/O here."""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx

from hitl_client.errors import Cancelled, Expired, NotApproved, Rejected, error_for
from hitl_client.models import APPROVED, CANCELLED, EXPIRED, REJECTED, ApprovalRequest

# Headers whose values the service never sees in the clear (it keeps a keyed digest of each): named, not
# guessed from their values. A caller adds its own with ``secret_headers``.
SECRET_HEADERS = ("authorization", "proxy-authorization", "cookie", "x-api-key", "api-key")
KEY_MAX = 200
WAIT_STEP = 60.0  # the service holds a long-poll at most this long


def idempotency_key(run_id: str, call_id: str) -> str:
    """One key per call of one run: a retried run files nothing twice. Long ids are hashed to fit."""
    if not run_id or not call_id:
        raise ValueError("run_id and call_id must be stable, non-empty ids of the run and of the call")
    key = f"{run_id}/{call_id}"
    return key if len(key) <= KEY_MAX else "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def canonical_json(value: Any) -> str:
    """Keys sorted, no spaces, UTF-8: one text per value, however it was built."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def pinned(request: httpx.Request, secret_headers: Iterable[str] = SECRET_HEADERS) -> dict[str, Any]:
    """``request`` as the service pins it: method, URL, every header exactly as it will be sent, the body
    as text, and which headers are secret (those of ``secret_headers`` it carries)."""
    headers: dict[str, str] = {}
    for name, value in request.headers.multi_items():
        if name.lower() in {known.lower() for known in headers}:
            raise ValueError(f"header {name!r} appears twice: a pinned request takes each header once")
        headers[name] = value
    body = request.read()
    try:
        text = body.decode("utf-8") if body else None
    except UnicodeDecodeError:
        raise ValueError("a pinned request's body must be UTF-8 text") from None
    wanted = {name.lower() for name in secret_headers}
    secret = [name for name in headers if name.lower() in wanted]
    return {
        "method": request.method,
        "url": str(request.url),
        "headers": headers,
        "body": text,
        "secretHeaders": secret,
    }


def approved_request(grant_request: dict[str, Any], original: httpx.Request) -> httpx.Request:
    """The request the grant covers (a reviewer's edit applied), with the secret headers' values from
    ``original``: the service never had them."""
    secret = {name.lower() for name in grant_request.get("secretHeaders") or ()}
    headers = [
        (name, original.headers.get(name, "") if name.lower() in secret else value)
        for name, value in (grant_request.get("headers") or {}).items()
    ]
    body = grant_request.get("body")
    return httpx.Request(
        grant_request["method"],
        grant_request["url"],
        headers=headers,
        content=None if body is None else body.encode("utf-8"),
    )


def filing(
    *,
    key: str,
    agent: str,
    action: str,
    arguments: Mapping[str, Any] | None,
    reason: str,
    request: dict[str, Any] | None = None,
    on_behalf_of: str | None = None,
    context: Any = None,
    hitl_config: Mapping[str, Any] | None = None,
    callback_url: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "idempotencyKey": key,
        "agent": agent,
        "action": {"name": action, "arguments": dict(arguments or {})},
        "reason": reason,
    }
    optional = {
        "request": request,
        "onBehalfOf": on_behalf_of,
        "context": context,
        "hitlConfig": dict(hitl_config) if hitl_config is not None else None,
        "callbackUrl": callback_url,
    }
    body.update({name: value for name, value in optional.items() if value is not None})
    return body


def outcome(status: str, http_status: int | None, summary: str) -> dict[str, Any]:
    if status not in ("succeeded", "failed"):
        raise ValueError("status must be 'succeeded' or 'failed'")
    return {"status": status, "httpStatus": http_status, "summary": summary[:1000]}


def answer(response: httpx.Response) -> Any:
    """The JSON of a 2xx answer; a typed ``HitlError`` for anything else."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.is_success:
        return body
    raise error_for(response.status_code, body)


def approval(response: httpx.Response) -> ApprovalRequest:
    return ApprovalRequest.from_json(answer(response))


def found_by_key(response: httpx.Response) -> ApprovalRequest | None:
    """The one request a list filtered by idempotency key holds, or None."""
    found = answer(response)["approvalRequests"]
    return ApprovalRequest.from_json(found[0]) if found else None


def require_approved(found: ApprovalRequest) -> ApprovalRequest:
    """``found`` if it was approved; else the ``NotApproved`` that says how it ended."""
    if found.status == APPROVED:
        return found
    if found.status == CANCELLED:
        raise Cancelled(found)
    if found.status == EXPIRED:
        raise Expired(found)
    if found.status == REJECTED:
        raise Rejected(found)
    raise NotApproved(found)


def bound_arguments(
    function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """A call's arguments by parameter name (defaults applied), as the JSON the reviewer will read."""
    bound = inspect.signature(function).bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    json.dumps(arguments)  # a TypeError here: the arguments of a gated function must be JSON values
    return arguments
