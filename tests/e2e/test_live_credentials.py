"""A change to a credential, committed by another process, reaches a live uvicorn that had kept it
(approvals.credential_cache): the server hears it through its listening connection, and with that
connection gone it checks every token in the database.

Each change is plain SQL through a connection of this test's own, as psql would make it. A notice
takes a moment to arrive, so the tests after a change ask until the server refuses (at most
``PATIENCE`` seconds) and check that, once refused, it never accepts again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import psycopg
import pytest
from rest_framework.authtoken.models import Token

from harnesses.live_stack import LiveStack, api_user, database_url, running_stack
from harnesses.users import make_user

pytestmark = pytest.mark.django_db(transaction=True)

PATIENCE = 5.0


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveStack]:
    yield from running_stack(django_db_blocker, tmp_path_factory.mktemp("credentials"), qclusters=False)


def committed(sql: str, params: object = None) -> list[tuple]:
    with psycopg.connect(database_url(), autocommit=True) as other:
        cursor = other.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def listener_backend(server: LiveStack, client: httpx.Client, path: str) -> int:
    """The server's listening connection's backend, once it has one (it is made on a thread of its own
    after the first request): its requests are then answered from what it keeps."""
    name = f"hitl credential listener {server.server.popen.pid}"
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        assert client.get(path).status_code == 200
        found = committed("SELECT pid FROM pg_stat_activity WHERE application_name = %s", [name])
        if found:
            return found[0][0]
        time.sleep(0.05)
    raise AssertionError(f"no listening connection of the server within {PATIENCE} s")


def statuses_until(client: httpx.Client, path: str, refused: int) -> list[int]:
    """GET ``path`` until it answers ``refused`` (or PATIENCE runs out), then three times more."""
    statuses = []
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline and refused not in statuses:
        statuses.append(client.get(path).status_code)
    statuses += [client.get(path).status_code for _ in range(3)]
    return statuses


def refused_for_good(statuses: list[int], accepted: int, refused: int) -> bool:
    first = statuses.index(refused) if refused in statuses else len(statuses)
    return set(statuses[:first]) <= {accepted} and set(statuses[first:]) == {refused}


def test_a_token_deleted_by_another_process_is_refused_by_the_server(server):
    key = api_user("alice")
    with server.client(key) as alice:
        listener_backend(server, alice, "/agents/pending-approvals")
        assert [alice.get("/agents/pending-approvals").status_code for _ in range(3)] == [200] * 3
        committed("DELETE FROM authtoken_token WHERE key = %s", [key])
        statuses = statuses_until(alice, "/agents/pending-approvals", 401)
    assert refused_for_good(statuses, 200, 401), statuses


def test_a_role_removed_by_another_process_is_refused_by_the_server(server, settings):
    ops = make_user("ops", "admin")
    ops.is_staff = False  # only the group makes this user an admin
    ops.save(update_fields=["is_staff"])
    with server.client(Token.objects.get(user=ops).key) as client:
        listener_backend(server, client, "/audit/entries")
        assert [client.get("/audit/entries").status_code for _ in range(3)] == [200] * 3
        committed("DELETE FROM auth_user_groups WHERE user_id = %s", [ops.pk])
        statuses = statuses_until(client, "/audit/entries", 403)
    assert refused_for_good(statuses, 200, 403), statuses


def test_with_its_listening_connection_killed_the_server_asks_the_database(server):
    key = api_user("alice")
    with server.client(key) as alice:
        backend = listener_backend(server, alice, "/agents/pending-approvals")
        assert alice.get("/agents/pending-approvals").status_code == 200
        committed("SELECT pg_terminate_backend(%s, 5000)", [backend])  # returns once it has exited
        committed("DELETE FROM authtoken_token WHERE key = %s", [key])  # heard by no one of that server
        assert alice.get("/agents/pending-approvals").status_code == 401
