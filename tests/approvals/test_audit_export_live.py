"""GET /audit/export under a real uvicorn: the file streams while the server is still reading rows.

Django buffers a StreamingHttpResponse over a sync iterator whole under ASGI before the first byte
leaves. To tell the two apart without timing, the client reads only the first chunk of a large
export and stops reading: a streaming server is then blocked mid-export with its server-side cursor
open (the last statement of its database session is a FETCH), while a buffering one would have
fetched every row and closed the cursor before sending anything.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from django.conf import settings
from django.db import connection
from rest_framework.authtoken.models import Token

from harnesses.live_stack import eventually
from harnesses.users import make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]

ROWS = 100_000  # about 45 MB of JSON Lines: far more than loopback socket buffers hold
STARTUP_TIMEOUT = 60.0
STOP_WITHIN = 3.0
BLOCKED_WITHIN = 30.0  # a streaming server fills the socket buffers in well under a second

INSERT_ENTRIES = """
INSERT INTO approvals_auditentry (subject_type, subject_id, sequence, conversation_id, pause_id, epoch,
    verb, actor, automated, verdict, note, detail, created_at, prev_hash, entry_hash)
SELECT 'conversation', md5('subject' || (g / 10))::uuid, g %% 10 + 1, md5('subject' || (g / 10))::uuid,
       md5('pause' || (g / 10))::uuid, md5('epoch' || (g / 10))::uuid, 'hitl.approval', 'approver', false,
       'APPROVED', 'streamed', jsonb_build_object('n', g, 'pauseType', 'RULE'),
       timestamptz '2026-01-01' + g * interval '1 second', md5(g::text) || md5(g::text),
       md5((g + 1)::text) || md5((g + 1)::text)
FROM generate_series(0, %(rows)s - 1) AS g
"""


def database_url() -> str:
    db = connection.settings_dict
    user = quote(db.get("USER") or "postgres", safe="")
    password = ":" + quote(db["PASSWORD"], safe="") if db.get("PASSWORD") else ""
    return (
        f"postgres://{user}{password}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """uvicorn serving the project's ASGI application on the test database; its base URL."""
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hitl_project.settings.test",
        "DATABASE_URL": database_url(),
        "LOG_LEVEL": "WARNING",
    }
    log = tmp_path / "uvicorn.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "hitl_project.asgi:application", "--host", "127.0.0.1",
             "--port", str(port), "--log-level", "warning", "--no-access-log"],
            cwd=settings.BASE_DIR, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"uvicorn did not start:\n{log.read_text(errors='replace')[-4000:]}")
            try:
                if httpx.get(f"{base_url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield base_url
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # start_new_session: the server leads its own group
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def other_sessions() -> list[tuple[str, str]]:
    """(state, last statement) of every other client session on the test database: the server's."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT state, query FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        return [(row[0] or "", row[1] or "") for row in cursor.fetchall()]


def exports_waiting_on_the_client() -> list[tuple[str, str]]:
    """Sessions stopped mid-export: in their transaction, the cursor open, the last statement a FETCH."""
    return [
        (state, query)
        for state, query in other_sessions()
        if state == "idle in transaction" and query.startswith("FETCH FORWARD")
    ]


def exports_still_open() -> list[tuple[str, str]]:
    """Sessions still fetching rows or still holding their transaction open."""
    return [
        (state, query)
        for state, query in other_sessions()
        if state.startswith("idle in transaction") or query.startswith("FETCH")
    ]


def test_export_streams_while_the_server_is_still_reading_rows(server: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(INSERT_ENTRIES, {"rows": ROWS})
    token = Token.objects.get(user=make_user("exporter", "approver")).key

    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=server, headers=headers, timeout=120) as client:
        with client.stream("GET", "/audit/export", params={"format": "jsonl"}) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-disposition"].startswith("attachment;")
            chunks = response.iter_bytes()
            first = next(chunks)
            assert 0 < len(first) < 1024 * 1024
            # A streaming server runs into the full socket buffers and waits there, its cursor open;
            # a buffering one would have closed it before the first byte left.
            eventually(
                exports_waiting_on_the_client,
                timeout=BLOCKED_WITHIN,
                what="the export to wait on the client mid-stream, its cursor open",
            )
            rest = b"".join(chunks)
    lines = (first + rest).splitlines()
    assert len(lines) == ROWS
    assert lines[-1].startswith(b'{"id":') and b'"note":"streamed"' in lines[-1]


def test_a_client_that_goes_away_ends_the_export_and_its_transaction(server: str) -> None:
    rows = 3 * ROWS  # exporting them all takes the server well over STOP_WITHIN seconds
    with connection.cursor() as cursor:
        cursor.execute(INSERT_ENTRIES, {"rows": rows})
    token = Token.objects.get(user=make_user("quitter", "approver")).key

    with httpx.Client(base_url=server, headers={"Authorization": f"Token {token}"}, timeout=120) as client:
        with client.stream("GET", "/audit/export", params={"format": "csv"}) as response:
            assert next(response.iter_bytes()).startswith(b"id,sequence,")
        # Leaving the block closed the connection at the start of the file.
        eventually(
            lambda: not exports_still_open(),
            timeout=STOP_WITHIN,
            interval=0.05,
            what="the server to end the export and its transaction after the client left",
        )
        assert client.get("/audit/export", params={"format": "jsonl", "actor": "nobody"}).status_code == 200
