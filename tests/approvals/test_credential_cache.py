"""The verified credentials a process keeps (approvals.credential_cache), against real PostgreSQL.

Every change below is committed through a connection of its own with plain SQL, as psql or another
process would make it: only the triggers and the listening connection can tell this process of it.
A test that needs the notice waits until it has reached the listening connection's socket, then asks.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed

from approvals import credential_cache
from approvals.access import is_approver
from approvals.authentication import TokenWithRolesAuthentication
from approvals.credential_cache import credentials
from harnesses.live_stack import database_url
from harnesses.users import make_user

pytestmark = pytest.mark.django_db(transaction=True)  # autocommit, as a web request's authentication runs


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    credentials.close()
    yield
    credentials.close()


def committed(sql: str, params: Any = None) -> None:
    with psycopg.connect(database_url(), autocommit=True) as other:
        other.execute(sql, params)


def listening(timeout: float = 5.0) -> None:
    """Wait until this process listens: the connection is made and proved on a thread of its own."""
    deadline = time.monotonic() + timeout
    while credentials._listener is None:
        assert time.monotonic() < deadline, f"no listening connection within {timeout} s"
        credentials.lookup("")  # starts one unless one is being made
        time.sleep(0.01)


def attempt_over(timeout: float = 5.0) -> None:
    """Wait until the thread making a listening connection has given up or succeeded."""
    deadline = time.monotonic() + timeout
    while credentials._connecting:
        assert time.monotonic() < deadline, f"still connecting after {timeout} s"
        time.sleep(0.01)


def notice_arrived(timeout: float = 5.0) -> None:
    """Wait until something reached the listening connection (this process takes it in on its next lookup)."""
    listener = credentials._listener
    assert listener is not None, "no listening connection"
    readable, _, _ = select.select([listener.pgconn.socket], [], [], timeout)
    assert readable, f"no notice reached the listening connection within {timeout} s"


def authenticate(key: str) -> tuple[Any, int]:
    """What the token authenticates, and how many statements Django's connection ran for it."""
    with CaptureQueriesContext(connection) as queries:
        user, _token = TokenWithRolesAuthentication().authenticate_credentials(key)
    return user, len(queries)


def key_of(user: Any) -> str:
    return Token.objects.get(user=user).key


def test_an_accepted_token_is_read_from_the_database_once_while_nothing_changes():
    approver = make_user("approver", "approver")
    key = key_of(approver)
    listening()
    first, statements = authenticate(key)
    assert statements == 1
    for _ in range(3):
        again, statements = authenticate(key)
        assert statements == 0
        assert again.pk == approver.pk and again.username == "approver" and is_approver(again)
        assert again is not first  # each request gets instances of its own


def test_a_token_deleted_elsewhere_is_refused_once_the_notice_arrives():
    key = key_of(make_user("alice"))
    listening()
    authenticate(key)
    committed("DELETE FROM authtoken_token WHERE key = %s", [key])
    notice_arrived()
    with pytest.raises(AuthenticationFailed, match="Invalid token"):
        authenticate(key)


def test_a_user_deactivated_elsewhere_is_refused_once_the_notice_arrives():
    alice = make_user("alice")
    key = key_of(alice)
    listening()
    authenticate(key)
    committed("UPDATE auth_user SET is_active = false WHERE id = %s", [alice.pk])
    notice_arrived()
    with pytest.raises(AuthenticationFailed, match="inactive"):
        authenticate(key)


def test_a_role_removed_elsewhere_is_gone_once_the_notice_arrives():
    approver = make_user("approver", "approver")
    key = key_of(approver)
    listening()
    assert is_approver(authenticate(key)[0])
    committed("DELETE FROM auth_user_groups WHERE user_id = %s", [approver.pk])
    notice_arrived()
    user, statements = authenticate(key)
    assert statements == 1 and not is_approver(user)


def test_a_group_renamed_elsewhere_no_longer_gives_its_role():
    approver = make_user("approver", "approver")
    key = key_of(approver)
    listening()
    assert is_approver(authenticate(key)[0])
    committed("UPDATE auth_group SET name = 'former approvers'")
    notice_arrived()
    assert not is_approver(authenticate(key)[0])


def test_a_role_granted_elsewhere_counts_once_the_notice_arrives(settings):
    alice = make_user("alice")
    key = key_of(alice)
    make_user("approver", "approver")  # the group exists
    listening()
    assert not is_approver(authenticate(key)[0])
    committed(
        "INSERT INTO auth_user_groups (user_id, group_id) SELECT %s, id FROM auth_group WHERE name = %s",
        [alice.pk, settings.HITL_APPROVER_GROUP],
    )
    notice_arrived()
    assert is_approver(authenticate(key)[0])


def test_an_answer_read_while_a_change_commits_is_not_kept():
    alice = make_user("alice")
    key = key_of(alice)
    listening()
    stamp = credentials.stamp()  # taken before the statement, as authentication takes it
    row = Token.objects.filter(pk=key).values_list("key", "user_id").first()
    committed("UPDATE auth_user SET is_active = false WHERE id = %s", [alice.pk])
    notice_arrived()
    assert credentials.lookup("another request's key") is None  # another thread takes the notice in
    credentials.keep(key, row, stamp)
    assert credentials.lookup(key) is None
    with pytest.raises(AuthenticationFailed, match="inactive"):
        authenticate(key)


def test_a_broken_listening_connection_sends_every_lookup_to_the_database(monkeypatch):
    key = key_of(make_user("alice"))
    other = key_of(make_user("bob"))
    listening()
    authenticate(key)
    pid = credentials._listener.info.backend_pid
    committed("SELECT pg_terminate_backend(%s, 5000)", [pid])  # returns once that backend has exited
    committed("DELETE FROM authtoken_token WHERE key = %s", [key])  # nobody listens: its notice is lost
    with pytest.raises(AuthenticationFailed, match="Invalid token"):
        authenticate(key)
    assert [authenticate(other)[1] for _ in range(3)] == [1, 1, 1]  # nothing kept, no new connection yet
    assert credentials._listener is None and not credentials._connecting
    now = credentials._clock()
    monkeypatch.setattr(credentials, "_clock", lambda: now + 6)  # past the wait before a new connection
    listening()
    assert [authenticate(other)[1] for _ in range(3)] == [1, 0, 0]
    assert credentials._listener.info.backend_pid != pid


def test_without_its_triggers_nothing_is_kept(caplog):
    key = key_of(make_user("alice"))
    committed("ALTER TABLE auth_user_groups DISABLE TRIGGER hitl_credentials_changed")
    try:
        with caplog.at_level(logging.WARNING, logger="approvals.credential_cache"):
            authenticate(key)  # starts the listening connection, which refuses to count
            attempt_over()
            assert [authenticate(key)[1] for _ in range(3)] == [1, 1, 1]
        assert "3 of the 4 hitl_credentials_changed triggers are enabled" in caplog.text
    finally:
        committed("ALTER TABLE auth_user_groups ENABLE TRIGGER hitl_credentials_changed")


def test_a_listening_connection_that_hears_nothing_is_not_trusted(monkeypatch, caplog):
    """What a pooler in transaction mode does: the LISTEN ran on a server connection this one does not
    keep, so no notice ever comes back on it."""
    monkeypatch.setattr(credential_cache, "_listen", lambda listener: listener.execute("UNLISTEN *"))
    monkeypatch.setattr(credential_cache, "PROBE_SECONDS", 0.2)
    key = key_of(make_user("alice"))
    with caplog.at_level(logging.WARNING, logger="approvals.credential_cache"):
        authenticate(key)
        attempt_over()
        assert [authenticate(key)[1] for _ in range(3)] == [1, 1, 1]
    assert "did not hear a notice" in caplog.text and credentials._listener is None


def test_no_request_waits_for_the_listening_connection(monkeypatch):
    released = threading.Event()

    def slow_listen(listener: Any) -> None:
        released.wait(10)
        listener.execute(f"LISTEN {credential_cache.CHANNEL}")

    monkeypatch.setattr(credential_cache, "_listen", slow_listen)
    key = key_of(make_user("alice"))
    assert [authenticate(key)[1] for _ in range(3)] == [1, 1, 1]  # each answered from the database
    assert credentials._listener is None and credentials._connecting
    released.set()
    listening()
    assert [authenticate(key)[1] for _ in range(2)] == [1, 0]


def test_inside_a_transaction_the_cache_is_neither_read_nor_filled():
    key = key_of(make_user("alice"))
    listening()
    with transaction.atomic():
        assert [authenticate(key)[1] for _ in range(2)] == [1, 1]
    assert authenticate(key)[1] == 1  # nothing was kept inside
    assert authenticate(key)[1] == 0
    with transaction.atomic():
        assert authenticate(key)[1] == 1  # what was kept outside is not read inside


def test_an_entry_is_read_for_at_most_the_configured_seconds(monkeypatch, settings):
    settings.HITL_CREDENTIAL_CACHE_SECONDS = 60
    key = key_of(make_user("alice"))
    listening()
    start = float(int(credentials._clock()))  # whole seconds: start + 60 - start is exactly 60
    monkeypatch.setattr(credentials, "_clock", lambda: start)
    authenticate(key)
    monkeypatch.setattr(credentials, "_clock", lambda: start + 59.9)
    assert authenticate(key)[1] == 0
    monkeypatch.setattr(credentials, "_clock", lambda: start + 60)
    assert authenticate(key)[1] == 1


def test_zero_seconds_turns_the_cache_off(settings):
    settings.HITL_CREDENTIAL_CACHE_SECONDS = 0
    key = key_of(make_user("alice"))
    assert [authenticate(key)[1] for _ in range(3)] == [1, 1, 1]
    assert credentials._listener is None


def test_a_refusal_is_never_kept():
    carol = make_user("carol")
    committed("UPDATE auth_user SET is_active = false WHERE id = %s", [carol.pk])
    listening()
    for key in ("no-such-key", key_of(carol)):
        for _ in range(2):
            with CaptureQueriesContext(connection) as queries, pytest.raises(AuthenticationFailed):
                TokenWithRolesAuthentication().authenticate_credentials(key)
            assert len(queries) == 1


def test_a_forked_child_neither_reads_its_parents_entries_nor_uses_its_connection():
    key = key_of(make_user("alice"))
    listening()
    authenticate(key)
    parent_backend = credentials._listener.info.backend_pid
    child = os.fork()
    if child == 0:  # the child: exit without running Django's or pytest's clean-up on inherited state
        code = 0
        try:
            if credentials.lookup(key) is not None:
                code = 1
            else:
                listening()  # a connection of its own, made by a thread of its own
                if credentials._listener.info.backend_pid == parent_backend:
                    code = 2
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    notice_arrived()  # the child's connection proved itself with a notice, which every listener hears
    assert [authenticate(key)[1] for _ in range(2)] == [1, 0]
    assert credentials._listener.info.backend_pid == parent_backend  # the parent's connection still works
