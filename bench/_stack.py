"""Helpers for the bench scripts: a live stack (uvicorn + q-cluster) on a dedicated database.

    with Stack.from_args(args) as stack:
        client = stack.client("alice")
        ...

What a stack does, in order:
  1. makes sure the database ``hitl_bench`` exists (``--fresh`` drops and recreates it);
  2. runs ``manage.py migrate`` and creates the users admin / approver / alice with
     ``manage.py hitl_user`` (the token is the last line of its stdout);
  3. starts the web server, uvicorn (``hitl_project.asgi:application``, ``--workers N``) or, serving the
     REST API alone (``hitl_project.wsgi:application``), with ``--server granian`` granian's WSGI interface
     (``--threads``: its blocking threads per worker) or with ``--server gunicorn`` gunicorn's sync
     workers, and, unless told not to,
     a ``manage.py qcluster`` (``HITL_Q_WORKERS``), each in its own process group, with
     ``DATABASE_URL`` pointing at the bench database, ``HITL_DB_POOL=true`` and ``LOG_LEVEL=WARNING``;
  4. waits for ``/healthz``, then creates and deploys the ``account_bot()`` agent of
     harnesses/factories.py through the REST API;
  5. at exit (normal, exception, Ctrl-C or SIGTERM) stops both process groups.

Also here: ``summarize`` / ``print_latency`` (p50/p95/p99 in ms, mean, count) and
``process_groups()`` of a stack. What a timed run costs (``CostMeter``, ``Window``) is in _cost.py.
``--nodelay`` runs uvicorn with ``--http hitl_project.uvicorn_protocol:NoDelayH11Protocol``
(TCP_NODELAY on accepted sockets, which uvicorn leaves off with ``--workers``: uvicorn issue #3149).
"""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python")
# The benches drive the service as fast as it goes, as one user: its per-user rates and caps of pending
# approvals (docs/operations.md, "Throttles and caps") are off in every process they start.
UNTHROTTLED = {
    "HITL_THROTTLE_TURNS_RATE": "off",
    "HITL_THROTTLE_WRITES_RATE": "off",
    "HITL_MAX_OPEN_PAUSES_PER_USER": "0",
    "HITL_MAX_OPEN_PAUSES_PER_AGENT": "0",
}
if not Path(PYTHON).exists():  # run from another interpreter: use it for the children too
    PYTHON = sys.executable
LOG_DIR = ROOT / "var" / "log"

PG_HOST, PG_PORT, PG_USER = "127.0.0.1", 5432, "postgres"
DEFAULT_DB = "hitl_bench"
NODELAY_PROTOCOL = "hitl_project.uvicorn_protocol:NoDelayH11Protocol"
USERS = (("admin", "admin"), ("approver", "approver"), ("alice", "user"))
SERVERS = ("uvicorn", "uvicorn-fast", "gunicorn", "granian")


# --- PostgreSQL --------------------------------------------------------------------------------


def conninfo(dbname: str) -> str:
    return f"host={PG_HOST} port={PG_PORT} user={PG_USER} dbname={dbname}"


def database_url(dbname: str) -> str:
    return f"postgres://{PG_USER}@{PG_HOST}:{PG_PORT}/{dbname}"


def ensure_database(dbname: str, *, fresh: bool) -> bool:
    """Creates the database if missing (drops it first with ``fresh``); True if it was created."""
    import psycopg

    with psycopg.connect(conninfo("postgres"), autocommit=True) as conn:
        if fresh:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{dbname}"')
            return True
    return False


def sessions_opened(conn: Any) -> int:
    """PostgreSQL sessions ever opened on the connection's database (pg_stat_database, PostgreSQL 14+)."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return conn.execute(
        "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()[0]


def connect(dbname: str = DEFAULT_DB, **kwargs: Any) -> Any:
    import psycopg

    return psycopg.connect(conninfo(dbname), **kwargs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def stop_group(proc: subprocess.Popen[Any], *, grace: float = 15.0) -> None:
    """TERM to the group's leader (a graceful stop), then KILL whatever of its group is left."""
    pgid = proc.pid  # start_new_session=True: the child leads its own group
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc.poll() is not None and not _group_alive(pgid):
            break
        time.sleep(0.1)
    if _group_alive(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def raise_exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


# --- the stack ---------------------------------------------------------------------------------


def add_stack_args(
    parser: argparse.ArgumentParser,
    *,
    workers: int = 1,
    q_workers: int = 2,
    qcluster: bool = True,
    server: str = "uvicorn",
) -> None:
    group = parser.add_argument_group("stack")
    group.add_argument("--workers", type=int, default=workers, help=f"web server workers (default {workers})")
    group.add_argument(
        "--server",
        choices=SERVERS,
        default=server,
        help="uvicorn (ASGI, h11), uvicorn-fast (on uvloop and httptools, as ./scripts/start runs it), "
        f"granian (its WSGI interface) or gunicorn (WSGI, sync workers); default {server}",
    )
    group.add_argument(
        "--threads",
        type=int,
        default=1,
        help="granian's blocking threads per worker; gunicorn --threads: above 1, its gthread workers "
        "(keep-alive, requests side by side); default 1",
    )
    group.add_argument(
        "--q-workers",
        type=int,
        default=q_workers,
        help=f"q-cluster workers, HITL_Q_WORKERS (default {q_workers})",
    )
    if qcluster:
        group.add_argument(
            "--no-qcluster", dest="qcluster", action="store_false", help="do not start a q-cluster"
        )
    else:
        group.add_argument("--qcluster", dest="qcluster", action="store_true", help="also start a q-cluster")
    group.add_argument("--fresh", action="store_true", help=f"drop and recreate the database {DEFAULT_DB}")
    group.add_argument("--db", default=DEFAULT_DB, help=f"database name (default {DEFAULT_DB})")
    group.add_argument("--port", type=int, default=0, help="uvicorn port (default: a free one)")
    group.add_argument(
        "--nodelay",
        action="store_true",
        help=f"uvicorn --http {NODELAY_PROTOCOL} (TCP_NODELAY; uvicorn issue #3149)",
    )
    group.add_argument(
        "--qcluster-pool",
        action="store_true",
        help="run the q-cluster with HITL_DB_POOL=true too (it breaks: see Stack.start_qcluster)",
    )
    group.add_argument(
        "--q-conn-max-age",
        type=int,
        default=0,
        metavar="SECONDS",
        help="CONN_MAX_AGE of the q-cluster (in its DATABASE_URL); default: the settings' (0)",
    )
    group.add_argument(
        "--pool-max", type=int, default=20, help="HITL_DB_POOL_MAX per web process (default 20)"
    )


class Stack:
    def __init__(
        self,
        *,
        workers: int = 1,
        q_workers: int = 2,
        qcluster: bool = True,
        fresh: bool = False,
        db: str = DEFAULT_DB,
        port: int = 0,
        nodelay: bool = False,
        pool_max: int = 20,
        qcluster_pool: bool = False,
        q_conn_max_age: int = 0,
        quiet: bool = False,
        server: str = "uvicorn",
        threads: int = 1,
    ) -> None:
        self.workers = workers
        self.threads = threads
        self.server = server
        self.q_workers = q_workers
        self.with_qcluster = qcluster
        self.fresh = fresh
        self.db = db
        self.port = port or free_port()
        self.nodelay = nodelay
        self.pool_max = pool_max
        self.qcluster_pool = qcluster_pool
        self.q_conn_max_age = q_conn_max_age
        self.quiet = quiet
        self.url = f"http://127.0.0.1:{self.port}"
        self.tokens: dict[str, str] = {}
        self.agent_id = ""
        self._procs: list[subprocess.Popen[Any]] = []
        self._logs: list[Any] = []
        self._clients: list[Any] = []

    @classmethod
    def from_args(cls, args: argparse.Namespace, **overrides: Any) -> Stack:
        options = {
            "workers": args.workers,
            "q_workers": args.q_workers,
            "qcluster": args.qcluster,
            "fresh": args.fresh,
            "db": args.db,
            "port": args.port,
            "nodelay": args.nodelay,
            "pool_max": args.pool_max,
            "qcluster_pool": args.qcluster_pool,
            "q_conn_max_age": args.q_conn_max_age,
            "server": args.server,
            "threads": args.threads,
        }
        options.update(overrides)
        return cls(**options)

    # -- lifecycle

    def log(self, message: str) -> None:
        if not self.quiet:
            print(f"[stack] {message}", file=sys.stderr, flush=True)

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "DATABASE_URL": database_url(self.db),
                "HITL_DB_POOL": "true",
                "HITL_DB_POOL_MAX": str(self.pool_max),
                "LOG_LEVEL": "WARNING",
                "DJANGO_SETTINGS_MODULE": "hitl_project.settings.base",
                "HITL_Q_WORKERS": str(self.q_workers),
                **UNTHROTTLED,
            }
        )
        env.update(extra)
        return env

    def manage(self, *argv: str, pool: bool = False) -> str:
        env = self.env()
        if not pool:
            env["HITL_DB_POOL"] = "false"
        result = subprocess.run(
            [PYTHON, "manage.py", *argv], cwd=ROOT, env=env, capture_output=True, text=True
        )
        if result.returncode != 0:
            sys.stderr.write(result.stdout + result.stderr)
            raise RuntimeError(f"manage.py {' '.join(argv)} failed ({result.returncode})")
        return result.stdout

    def __enter__(self) -> Stack:
        atexit.register(self.stop)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, raise_exit)
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        t0 = time.monotonic()
        created = ensure_database(self.db, fresh=self.fresh)
        self.log(f"database {self.db}: {'created' if created else 'reused'}")
        self.manage("migrate", "--noinput", "-v0")
        for name, role in USERS:
            self.tokens[name] = self.manage("hitl_user", name, "--role", role).strip().splitlines()[-1]
        self.log(f"migrated, users {', '.join(n for n, _ in USERS)} ready ({time.monotonic() - t0:.1f} s)")
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self._spawn(self.server, self.server_argv())
        if self.with_qcluster:
            self.start_qcluster()
        self.wait_healthy()
        self.agent_id = self.create_agent()
        self.log(
            f"{self.describe_server()} on {self.url}"
            f"{f', q-cluster with {self.q_workers} workers' if self.with_qcluster else ''}; "
            f"agent {self.agent_id} ({time.monotonic() - t0:.1f} s)"
        )

    def server_argv(self) -> list[str]:
        if self.server == "granian":  # keep-alive; a worker's blocking threads run its requests side by side
            return [
                str(Path(PYTHON).parent / "granian"),
                "--interface",
                "wsgi",
                "hitl_project.wsgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                "--blocking-threads",
                str(self.threads),
                "--log-level",
                "warning",
            ]
        if self.server == "gunicorn":  # sync workers: one request at a time each, TCP_NODELAY by default
            return [
                str(Path(PYTHON).parent / "gunicorn"),
                "hitl_project.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(self.workers),
                "--threads",
                str(self.threads),
                "--log-level",
                "warning",
            ]
        argv = [
            PYTHON,
            "-m",
            "uvicorn",
            "hitl_project.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
            "--log-level",
            "warning",
            "--no-access-log",
        ]
        if self.server == "uvicorn-fast":
            # no delayed-ACK stall on uvloop with --workers (measured), so no NoDelay protocol
            argv += ["--loop", "uvloop", "--http", "httptools"]
        elif self.nodelay:
            argv += ["--http", NODELAY_PROTOCOL]
        return argv

    def describe_server(self) -> str:
        if self.server == "granian":
            return f"granian --interface wsgi --workers {self.workers} --blocking-threads {self.threads}"
        if self.server == "gunicorn":
            if self.threads > 1:
                return f"gunicorn --workers {self.workers} --threads {self.threads} (gthread, WSGI)"
            return f"gunicorn --workers {self.workers} (sync, WSGI)"
        if self.server == "uvicorn-fast":
            return f"uvicorn --workers {self.workers} (uvloop, httptools)"
        return f"uvicorn --workers {self.workers}{' +TCP_NODELAY' if self.nodelay else ''}"

    def start_qcluster(self) -> None:
        """Starts the q-cluster (called by start() unless qcluster=False; callable later, once)."""
        # Not HITL_DB_POOL: django-q2 forks its workers after Django has set up the pool, and the
        # children then share the parent's pooled connections (continuations fail with "the last
        # operation didn't produce records" and the cluster stalls). --qcluster-pool shows it.
        env = {"HITL_DB_POOL": "true" if self.qcluster_pool else "false"}
        if self.q_conn_max_age:  # django-environ reads CONN_MAX_AGE from the URL's query
            env["DATABASE_URL"] = f"{database_url(self.db)}?conn_max_age={self.q_conn_max_age}"
        self._spawn("qcluster", [PYTHON, "manage.py", "qcluster"], **env)

    def _spawn(self, name: str, argv: list[str], **env: str) -> None:
        log = open(LOG_DIR / f"bench-{name}.log", "w")  # closed in stop()
        self._logs.append(log)
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=self.env(**env),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        proc.bench_name = name  # type: ignore[attr-defined]
        self._procs.append(proc)

    def wait_healthy(self, timeout: float = 60.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.poll() is not None:
                    name = proc.bench_name  # type: ignore[attr-defined]
                    tail = (LOG_DIR / f"bench-{name}.log").read_text()[-3000:]
                    raise RuntimeError(f"{name} exited with {proc.returncode}:\n{tail}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.url}/healthz did not answer 200 within {timeout:.0f} s")

    def stop(self) -> None:
        for client in self._clients:
            try:
                client.close()
            except Exception:  # best effort at exit
                pass
        self._clients.clear()
        procs, self._procs = self._procs, []
        for proc in procs:  # uvicorn first: no new work for the q-cluster
            stop_group(proc)
        for log in self._logs:
            log.close()
        self._logs.clear()
        if procs:
            self.log("stopped " + " and ".join(p.bench_name for p in procs))  # type: ignore[attr-defined]

    def process_groups(self) -> dict[str, int]:
        """{"uvicorn": pgid, "qcluster": pgid} of the processes started (each leads its own group)."""
        return {proc.bench_name: proc.pid for proc in self._procs}  # type: ignore[attr-defined]

    # -- clients and the agent

    def client(self, user: str, **kwargs: Any) -> Any:
        """An httpx client (keep-alive) signed in as ``user``; closed when the stack stops."""
        import httpx

        options: dict[str, Any] = {"timeout": 60.0}
        options.update(kwargs)
        client = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Token {self.tokens[user]}"}, **options
        )
        self._clients.append(client)
        return client

    def create_agent(self) -> str:
        document = account_bot_document(self.db)
        admin = self.client("admin")
        response = admin.post("/agentstore/agents", json=document)
        response.raise_for_status()
        agent_id = response.json()["id"]
        version = response.json()["version"]
        admin.post(
            f"/administration/production/deploy/{agent_id}", params={"version": version}
        ).raise_for_status()
        return agent_id


def django_in_process(
    db: str, *, fresh: bool, pool: bool, keep_connection: bool = False, migrate: bool = True
) -> bool:
    """Django set up in this process against its own database ``db`` (created if missing, recreated with
    ``fresh``) and migrated (unless not ``migrate``: one migrated before), with the base settings, rates
    and caps off and metrics in a scratch directory: ``pool`` as the servers run; ``keep_connection``:
    one connection kept across requests (``CONN_MAX_AGE``) instead. Whether the database was created."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "hitl_project.settings.base"
    os.environ["DATABASE_URL"] = database_url(db) + ("?conn_max_age=600" if keep_connection else "")
    os.environ["HITL_DB_POOL"] = "true" if pool else "false"
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ.update(UNTHROTTLED)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix=f"hitl-{db}-metrics-")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    created = ensure_database(db, fresh=fresh)
    import django

    django.setup()
    if not migrate:
        return created
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    print(f"database {db}: {'created' if created else 'reused'} and migrated", flush=True)
    return created


def account_bot_document(db: str = DEFAULT_DB) -> dict[str, Any]:
    """harnesses.factories.account_bot(): importing it needs Django set up (it imports the services).

    Django is set up in this process against the bench database ``db`` (with the connection pool, as
    the servers run it), so scripts may also use the ORM or Django's request handler afterwards.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings.base")
    os.environ["DATABASE_URL"] = database_url(db)
    os.environ.update(UNTHROTTLED)  # the in-process runs drive this process's own views and services
    os.environ["HITL_DB_POOL"] = "true"  # as the servers run (the in-process client returns it per request)
    os.environ.setdefault(
        "LOG_LEVEL", "WARNING"
    )  # else httpx logs every request through Django's root logger
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from harnesses.factories import account_bot

    return account_bot()


# --- small helpers for the scripts ---------------------------------------------------------------


def start_conversation(client: Any, agent_id: str) -> str:
    response = client.post(f"/agents/{agent_id}/start", params={"environment": "production"})
    if response.status_code != 201:
        raise RuntimeError(f"start: {response.status_code} {response.text[:300]}")
    return response.json()["conversationId"]


def say(client: Any, conversation_id: str, text: str) -> dict[str, Any]:
    response = client.post(f"/agents/{conversation_id}", json={"input": text})
    if response.status_code != 200:
        raise RuntimeError(f"say: {response.status_code} {response.text[:300]}")
    return response.json()


def paused_conversation(client: Any, agent_id: str) -> str:
    conversation_id = start_conversation(client, agent_id)
    state = say(client, conversation_id, "please delete my account")["state"]
    if state != "AWAITING_HUMAN":
        raise RuntimeError(f"expected AWAITING_HUMAN after 'please delete my account', got {state}")
    return conversation_id


def counts(rows: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{k}={v}" for k, v in rows) or "none"
