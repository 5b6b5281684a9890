"""The credentials this process verified, kept until PostgreSQL says they changed.

A request's token is checked with one statement (approvals.authentication): the token's row, its user's
row and the user's group names. A client sends the same token on every request, so each web process
keeps what that statement answered, by key, and skips it while nothing it read has changed.

What tells the process of a change: the migration ``0016_credential_change_notices`` puts a trigger on
the token, user, user-group and group tables that sends ``NOTIFY hitl_credentials`` when a statement on
them commits (insert, update, delete or truncate; from Django, ``manage.py``, the admin or psql alike).
Each process has one connection of its own that LISTENs on that channel.

The rules, each in one place below:

- **Kept only while every change is heard** (``_trusted_generation``): an entry is read only while the
  listening connection is up, and a connection counts only once it has proved itself: the four triggers
  exist and are enabled, and it heard a notice sent from another connection (a pooler in transaction
  mode, which gives the server connection that ran the LISTEN to other clients, fails this). Before
  every read the lookup takes in what that connection received: any notice empties the cache; a
  connection found broken empties it and every lookup goes to the database until a new one has proved
  itself. A connection is made and proved on a thread of its own (tried at most every
  ``RECONNECT_SECONDS``): no request waits for it, each goes to the database meanwhile.
- **Stamped before the query** (``stamp``/``keep``): an entry carries the generation read before its
  statement ran, so a notice that arrives while it runs makes the entry stale before anyone reads it.
- **Only in autocommit**: a lookup inside a transaction neither reads nor fills the cache: its statement
  may see that transaction's own uncommitted writes, which no notice announces until they commit.
- **Bounded in time**: an entry is read at most ``HITL_CREDENTIAL_CACHE_SECONDS`` (60) after it was
  filled, whatever else happened; 0 turns the cache off.
- A refusal is never kept: an unknown key or an inactive user costs its statement every time.

A notice reaches every listening process within the time PostgreSQL takes to deliver it (well under a
millisecond on one machine): a request that arrives in that moment is answered as one that was already
running when the change committed would be. docs/decisions/0013-a-verified-token-is-kept-until-a-change.md
gives the reasons and the figures.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection

logger = logging.getLogger(__name__)

CHANNEL = "hitl_credentials"
TRIGGER = "hitl_credentials_changed"
RECONNECT_SECONDS = 5.0
MAX_ENTRIES = 10_000  # reached: the cache starts again empty
PROBE_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Stamp:
    """The generation a lookup saw before its statement ran, and when it saw it."""

    generation: int
    at: float


def credential_tables() -> list[str]:
    """The tables whose changes a kept credential depends on: the token, the user, the user's groups."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user_model = get_user_model()
    groups = user_model._meta.get_field("groups")
    return [
        Token._meta.db_table,
        user_model._meta.db_table,
        groups.remote_field.through._meta.db_table,
        groups.related_model._meta.db_table,
    ]


class CredentialCache:
    """One per process (``credentials`` below). Thread-safe: the WSGI thread pool shares it."""

    def __init__(self, *, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[int, float, tuple[Any, ...]]] = {}
        self._generation = 0
        self._listener: psycopg.Connection | None = None
        self._pid = os.getpid()
        self._retry_at = 0.0
        self._connecting = False
        self._epoch = 0

    # -- the rules ------------------------------------------------------------------------------------

    def lookup(self, key: str) -> tuple[Any, ...] | None:
        """The row kept for ``key``, if every rule above lets it be read; None: ask the database."""
        seconds = settings.HITL_CREDENTIAL_CACHE_SECONDS
        if seconds <= 0 or connection.in_atomic_block:
            return None
        with self._lock:
            generation = self._trusted_generation()
            entry = self._entries.get(key)
            if generation is None or entry is None:
                return None
            kept_generation, filled_at, row = entry
            if kept_generation != generation or self._clock() - filled_at >= seconds:
                del self._entries[key]
                return None
            return row

    def stamp(self) -> Stamp | None:
        """Taken before the statement whose answer ``keep`` may keep; None: it may not be kept."""
        if settings.HITL_CREDENTIAL_CACHE_SECONDS <= 0 or connection.in_atomic_block:
            return None
        with self._lock:
            generation = self._trusted_generation()
            return None if generation is None else Stamp(generation, self._clock())

    def keep(self, key: str, row: tuple[Any, ...], stamp: Stamp | None) -> None:
        """Keep an accepted credential's row, unless something changed since ``stamp`` was taken."""
        if stamp is None:
            return
        with self._lock:
            if self._trusted_generation() != stamp.generation:
                return
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[key] = (stamp.generation, stamp.at, row)

    # -- the listening connection -------------------------------------------------------------------

    def _trusted_generation(self) -> int | None:
        """The current generation, after taking in every notice received; None while changes may go
        unheard (no proved connection). Called with the lock held."""
        if self._pid != os.getpid():  # a forked child: the parent's socket (and thread) are not its own
            self._pid, self._listener, self._retry_at, self._connecting = os.getpid(), None, 0.0, False
            self._forget()
        if self._listener is None:
            if not self._connecting and self._clock() >= self._retry_at:
                self._connecting = True  # no request waits for it: they go to the database meanwhile
                threading.Thread(
                    target=self._connect_in_background,
                    args=(self._epoch,),
                    name="hitl credential listener",
                    daemon=True,
                ).start()
            return None
        if not self._take_in_notices(self._listener):
            self._close_listener()
            self._forget()
            self._retry_at = self._clock() + RECONNECT_SECONDS
            return None
        return self._generation

    def _forget(self) -> None:
        self._generation += 1
        self._entries.clear()

    def _take_in_notices(self, listener: psycopg.Connection) -> bool:
        """Read what the listening connection received without waiting; any notice empties the cache.
        False if the connection is broken (the server closed it, or it holds an error)."""
        pgconn = listener.pgconn
        try:
            for _ in range(8):  # a closing server sends its last message, then the end of the stream
                pgconn.consume_input()
                heard = False
                while pgconn.notifies() is not None:
                    heard = True
                if heard:
                    self._forget()
                if pgconn.status != psycopg.pq.ConnStatus.OK:
                    return False
                if not _readable(pgconn.socket, 0):
                    return True
        except (psycopg.Error, OSError, ValueError):
            return False
        return False

    def _connect_in_background(self, epoch: int) -> None:
        try:
            listener = self._connect()
        except Exception:  # whatever went wrong, this thread must hand the attempt back
            logger.exception(
                "credential cache: cannot listen for changes; every token is checked in the database"
            )
            listener = None
        with self._lock:
            if epoch != self._epoch or self._pid != os.getpid():  # closed (or forked) meanwhile
                if listener is not None and self._pid == os.getpid():
                    listener.close()
                return
            self._connecting = False
            if listener is None:
                self._retry_at = self._clock() + RECONNECT_SECONDS
                return
            self._listener = listener
            self._forget()  # anything kept before this connection listened may have changed unheard

    def _connect(self) -> psycopg.Connection | None:
        """A new listening connection that has proved itself, or None (logged)."""
        listener = None
        try:
            params = connection.get_connection_params()
            params.pop("cursor_factory", None)
            listener = psycopg.connect(
                **params,
                autocommit=True,
                application_name=f"hitl credential listener {os.getpid()}",
                connect_timeout=5,
            )
            _listen(listener)
            problem = _trigger_problem(listener) or _probe_problem(listener, params)
            if problem is None:
                logger.info("credential cache: listening on %s", CHANNEL)
                return listener
            logger.warning("credential cache: off in this process for now: %s", problem)
        except (psycopg.Error, OSError) as error:
            logger.warning(
                "credential cache: cannot listen for changes (%s); every token is checked in the database",
                error,
            )
        if listener is not None:
            listener.close()
        return None

    def _close_listener(self) -> None:
        logger.warning(
            "credential cache: the listening connection broke; every token is checked in the database"
        )
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()

    def close(self) -> None:
        """Close the listening connection (the next lookup starts a new one) and forget every entry."""
        with self._lock:
            listener, self._listener, self._retry_at = self._listener, None, 0.0
            self._epoch += 1  # a connection still being made is closed when it is ready
            self._connecting = False
            self._forget()
            if listener is not None and self._pid == os.getpid():
                listener.close()


def _readable(fd: int, seconds: float) -> bool:
    """Whether ``fd`` has something to read, waiting at most ``seconds`` (poll: any descriptor number)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(int(seconds * 1000)))


def _listen(listener: psycopg.Connection) -> None:
    listener.execute(f"LISTEN {CHANNEL}")


def _trigger_problem(listener: psycopg.Connection) -> str | None:
    tables = [connection.ops.quote_name(table) for table in credential_tables()]
    row = listener.execute(
        "SELECT count(*) FROM pg_trigger WHERE tgname = %s AND tgenabled IN ('O', 'A') "
        "AND tgrelid = ANY(ARRAY[to_regclass(%s), to_regclass(%s), to_regclass(%s), to_regclass(%s)])",
        [TRIGGER, *tables],
    ).fetchone()
    enabled = row[0] if row else 0
    if enabled != len(tables):
        return f"{enabled} of the {len(tables)} {TRIGGER} triggers are enabled (migrate approvals)"
    return None


def _probe_problem(listener: psycopg.Connection, params: dict[str, Any]) -> str | None:
    """Send a notice from another connection and wait to hear it on the listening one. A pooler that
    hands the LISTEN to a server connection it then gives to others fails this."""
    nonce = uuid.uuid4().hex
    with psycopg.connect(**params, autocommit=True, connect_timeout=5) as sender:
        sender.execute("SELECT pg_notify(%s, %s)", [CHANNEL, nonce])
    pgconn = listener.pgconn
    deadline = time.monotonic() + PROBE_SECONDS
    while (left := deadline - time.monotonic()) > 0:
        _readable(pgconn.socket, left)
        pgconn.consume_input()
        while (notice := pgconn.notifies()) is not None:
            if notice.extra.decode() == nonce:
                return None
    return f"the listening connection did not hear a notice within {PROBE_SECONDS:g} s"


credentials = CredentialCache()
