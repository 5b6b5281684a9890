"""Who calls /mcp: the owner of a REST token (``Authorization: Token …``), resolved before any tool runs.

The token is read exactly as REST reads it (approvals.authentication: the token, its user and the
user's roles in one query; an unknown token or an inactive user is refused), by an ASGI wrapper around
the MCP endpoint: a request without a valid token gets 401 and never reaches the MCP server. A service
account (role ``agent``: an agent running elsewhere, which files, claims and reports on approval requests
over REST) gets 403 there too: MCP is a surface for people, and no tool is one an agent may call. The
user rides in the ASGI scope to the tool, which reads it from the request the SDK hands it.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from mcp.server.transport_security import TransportSecuritySettings
from rest_framework import exceptions
from starlette.types import ASGIApp, Receive, Scope, Send

from approvals.access import is_service_account
from approvals.actors import Actor
from approvals.authentication import TokenWithRolesAuthentication, token_key

SCOPE_KEY = "hitl.user"
ACTOR_PREFIX = "mcp:"
UNAUTHENTICATED = {
    "error": "Authentication credentials were not provided or are not valid: send 'Authorization: Token <key>'",
    "errorCode": "UNAUTHENTICATED",
}
# What a host shows when it is refused: the scheme, and where to get a key. There is no OAuth here (so no
# /.well-known/oauth-protected-resource): an MCP host is given the API token as a header (docs/mcp.md).
CHALLENGE = b'Token realm="hitl", error="invalid_token", error_description="send Authorization: Token <key>"'
SERVICE_ACCOUNT = {
    "error": "Access denied: a service account (role agent) does not use MCP; it files, claims and reports "
    "on approval requests over REST",
    "errorCode": "FORBIDDEN",
}


def mcp_actor(user: Any) -> Actor:
    """``mcp:<username>``, acting as the user: a human actor (``Actor.automated`` is system: only), so
    access, separation of duties and the audit see the same person as over REST."""
    if not user or not user.is_authenticated:
        raise ValueError("an anonymous caller cannot act")
    return Actor(name=f"{ACTOR_PREFIX}{user.get_username()}", user=user)


def _token_key(scope: Scope) -> str | None:
    """The key of ``Authorization: Token <key>`` (or ``Bearer <key>``, as REST reads it:
    approvals.authentication.token_key); None for anything else."""
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            try:
                return token_key(value)
            except exceptions.AuthenticationFailed:
                return None
    return None


def _user_for_token(key: str) -> tuple[Any, bool]:
    """The token's active user (None when there is none) and whether it is a service account (its roles
    came with it: no query of their own)."""
    close_old_connections()
    try:
        user, _token = TokenWithRolesAuthentication().authenticate_credentials(key)
        return user, is_service_account(user)
    except exceptions.AuthenticationFailed:
        return None, False
    finally:
        close_old_connections()


class TokenRequired:
    """The MCP endpoint behind token authentication: 401 (JSON) unless the token names an active user,
    403 (JSON) when that user is a service account."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = _token_key(scope) if scope["type"] == "http" else None
        user, service_account = (
            await sync_to_async(_user_for_token, thread_sensitive=False)(key) if key else (None, False)
        )
        if user is None:
            await _refuse(send, 401, UNAUTHENTICATED)
            return
        if service_account:
            await _refuse(send, 403, SERVICE_ACCOUNT)
            return
        scope[SCOPE_KEY] = user
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, refusal: dict[str, str]) -> None:
    body = json.dumps(refusal).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", CHALLENGE))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def user_of(request: Any) -> Any:
    """The authenticated user of the HTTP request that carried a tool call (set by ``TokenRequired``)."""
    user = request.scope.get(SCOPE_KEY) if request is not None else None
    if user is None:  # TokenRequired runs before every request; a call without it is a wiring error
        raise RuntimeError("an MCP tool ran without an authenticated user")
    return user


def transport_security() -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection (421 to any other Host) allowing what Django's ALLOWED_HOSTS
    allows: each exact host, with any port, and the same hosts as Origins. ``*`` turns the check off as
    it does in Django; a subdomain pattern (``.example.com``) cannot be said to the SDK and is skipped
    (list the exact host names: docs/mcp.md)."""
    hosts = [host for host in settings.ALLOWED_HOSTS if host and not host.startswith(".")]
    if "*" in settings.ALLOWED_HOSTS:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[form for host in hosts for form in (host, f"{host}:*")],
        allowed_origins=[
            form
            for host in hosts
            for scheme in ("http", "https")
            for form in (f"{scheme}://{host}", f"{scheme}://{host}:*")
        ],
    )
