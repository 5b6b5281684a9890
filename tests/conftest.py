"""Shared fixtures: users of each role and authenticated API clients."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from harnesses.users import client_for, make_user


@pytest.fixture
def continuations_queued(settings):
    """A resume without ``?wait`` hands every continuation to the q-cluster (``HITL_CONTINUE_AFTER_RESPONSE``
    off), as it does for agents with slow tasks: the tests of the queued path and its recovery."""
    settings.HITL_CONTINUE_AFTER_RESPONSE = False


@pytest.fixture
def admin_user(db) -> User:
    return make_user("admin", "admin")


@pytest.fixture
def approver(db) -> User:
    return make_user("approver", "approver")


@pytest.fixture
def alice(db) -> User:
    return make_user("alice")


@pytest.fixture
def bob(db) -> User:
    return make_user("bob")


@pytest.fixture
def admin_client(admin_user) -> APIClient:
    return client_for(admin_user)


@pytest.fixture
def approver_client(approver) -> APIClient:
    return client_for(approver)


@pytest.fixture
def alice_client(alice) -> APIClient:
    return client_for(alice)


@pytest.fixture
def bob_client(bob) -> APIClient:
    return client_for(bob)


@pytest.fixture
def anon_client() -> APIClient:
    return APIClient()


@pytest.fixture
def http_recorder():
    """A real HTTP server on loopback that records every request and answers 200 {"ok": true}."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from types import SimpleNamespace
    from urllib.parse import urlsplit

    recorded: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            parts = urlsplit(self.path)
            recorded.append(
                {
                    "method": self.command,
                    "path": parts.path,
                    "query": parts.query,
                    "headers": dict(self.headers),
                    "body": body.decode("utf-8", "replace"),
                }
            )
            payload = json.dumps({"ok": True}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        def log_message(self, *args) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield SimpleNamespace(url=f"http://127.0.0.1:{server.server_port}", requests=recorded)
    finally:
        server.shutdown()
        server.server_close()


CANARY_SECRET_NAME = "hitl-canary"


@pytest.fixture(autouse=True)
def canary_secret(request, monkeypatch):
    """A canary secret exists in every database test, and no response body of the suite may contain it.

    Tests that build requests with ``${vault:hitl-canary}`` exercise every place a resolved secret could
    surface; any test-client response that carries the value fails the test that made the request.
    """
    uses_db = request.node.get_closest_marker("django_db") is not None or any(
        name in request.fixturenames for name in ("db", "transactional_db")
    )
    if not uses_db:
        yield None
        return
    import secrets as token_source

    from django.test.client import Client

    from toolgate.outbound.secret_store import set_secret

    request.getfixturevalue("transactional_db" if _is_transactional(request) else "db")
    value = "canary-" + token_source.token_urlsafe(24)
    set_secret(name=CANARY_SECRET_NAME, value=value)
    original = Client.request

    def checked(self, **request_kwargs):
        response = original(self, **request_kwargs)
        if not getattr(response, "streaming", False):
            assert value.encode() not in response.content, (
                f"the canary secret leaked in {request_kwargs.get('PATH_INFO')}"
            )
        return response

    monkeypatch.setattr(Client, "request", checked)
    yield value


def _is_transactional(request) -> bool:
    marker = request.node.get_closest_marker("django_db")
    return bool(marker and (marker.kwargs.get("transaction") or (marker.args and marker.args[0])))


# Left out of every run unless the -m expression names them (bench/ runs ``-m fullsize``,
# ./scripts/audit-deps ``-m registry``): deselected here rather than by a default ``-m`` in pyproject, which
# a user's own ``-m 'not browser'`` would replace, bringing the full-size harnesses back.
OPT_IN_MARKERS = ("fullsize", "registry")


def opted_in_markers(markexpr: str) -> set[str]:
    """The opt-in markers the ``-m`` expression names (its words; ``not fullsize`` names it too, and then
    the expression itself leaves those tests out)."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", markexpr))
    return {marker for marker in OPT_IN_MARKERS if marker in words}


def pytest_collection_modifyitems(config, items) -> None:  # pytest's objects
    """Deselect (never skip) the opt-in markers' tests that the ``-m`` expression does not name.

    The order stays pytest-django's (Django's): tests in a transaction first, then the transactional ones,
    whose live servers and clusters may still write after a test ends."""
    left_out = set(OPT_IN_MARKERS) - opted_in_markers(config.getoption("markexpr") or "")
    if not left_out:
        return
    kept, deselected = [], []
    for item in items:
        named = {mark.name for mark in item.iter_markers()}
        (deselected if named & left_out else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def pytest_terminal_summary(terminalreporter) -> None:  # pytest's reporter
    """Say where the browser tests' screenshots are (kept as artifacts of every run)."""
    from pathlib import Path

    artifacts = Path(__file__).resolve().parent.parent / "test-artifacts"
    shots = sorted(artifacts.glob("*.png")) if artifacts.is_dir() else []
    if shots:
        terminalreporter.write_line(f"browser screenshots: {len(shots)} in {artifacts}/")


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup):
    """pytest-django's, and before it drops the test database: the connection a process keeps to hear of
    credential changes (approvals.credential_cache) is closed, or DROP DATABASE would find it there."""
    yield
    from approvals.credential_cache import credentials

    credentials.close()
