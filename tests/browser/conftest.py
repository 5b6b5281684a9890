"""Browser tests: Playwright driving Debian's Chromium against pytest-django's live server.

The live server is Django's WSGI test server in a thread of this process, on the test database; the
tests commit their rows (``live_server`` implies a transactional database). A decision queues its
continuation on django-q2's ORM broker; the tests run it with ``run_queued_tasks()`` (the same task a
q-cluster worker would take from the same table), which keeps them fast and deterministic. A real
q-cluster is exercised by tests/e2e.

Chromium comes from Debian (``apt-get install chromium``; scripts/test installs it when run as root).
Playwright's own browser download (``playwright install``) is never used. A missing browser or
package fails these tests with a message saying what to install: they are never skipped silently.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

CHROMIUM = os.environ.get("HITL_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"
DOC_IMAGES = Path(settings.BASE_DIR) / "docs" / "images"
VIEWPORT = {"width": 1680, "height": 900}
WIDTHS = (1280, 1920)  # every reviewer-facing page is shown at both, with a screenshot each
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per module.

    Playwright's sync API keeps an asyncio event loop in this thread, which makes Django refuse ORM calls
    from the test ("you cannot call this from an async context"). The test really is synchronous, so
    DJANGO_ALLOW_ASYNC_UNSAFE is set while the browser is open, and restored afterwards.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "The browser tests need the playwright package: .venv/bin/pip install -e '.[test]' "
            "(never `playwright install`: the tests use Debian's Chromium)",
            pytrace=False,
        )
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: install Debian's package (apt-get install -y chromium); "
            "./scripts/test does it when run as root. Set HITL_CHROMIUM to use another binary.",
            pytrace=False,
        )
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
            try:
                yield chromium
            finally:
                chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def new_page(browser: Any, django_db_blocker: Any) -> Iterator[Callable[[], Any]]:
    """Open a page in a fresh browser context (its own cookies: one per reviewer). Once the test is over,
    the contexts are closed and the live server's last requests are let finish before the database is
    emptied (``wait_for_the_servers_statements``)."""
    contexts = []

    def open_page() -> Any:
        context = browser.new_context(viewport=VIEWPORT, locale="en-US", timezone_id="UTC")
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()
    if contexts:
        with django_db_blocker.unblock():
            wait_for_the_servers_statements()


def wait_for_the_servers_statements(timeout: float = 15.0) -> None:
    """Waits until no other session is inside a statement or a transaction on the test database.

    A page's last requests (the polls a clock's fast-forward fires at once) can still be running on the
    live server's threads after their browser context is closed; the flush that empties the database
    after the test would then take its locks table by table against theirs, and PostgreSQL ends one of
    the two as a deadlock, failing the flush and leaving the rows to the next test."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND backend_type = 'client backend' AND pid <> pg_backend_pid() AND state <> 'idle'"
            )
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(0.05)


@pytest.fixture
def page(new_page: Callable[[], Any]) -> Any:
    return new_page()


def admin_login(page: Any, base_url: str, username: str, password: str) -> None:
    """Sign in through the admin's login form, as a reviewer would."""
    page.goto(f"{base_url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base_url}/admin/")


def save_screenshot(page: Any, name: str, *, for_docs: bool = False) -> Path:
    """Save under test-artifacts/; with HITL_DOC_SCREENSHOTS=1 also refresh docs/images/ for the docs."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    if for_docs and os.environ.get("HITL_DOC_SCREENSHOTS") == "1":
        DOC_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOC_IMAGES / name)
    return path


def at_width(page: Any, width: int) -> Any:
    """The page at one of WIDTHS (the height stays; full-page screenshots show the rest)."""
    page.set_viewport_size({"width": width, "height": VIEWPORT["height"]})
    return page
