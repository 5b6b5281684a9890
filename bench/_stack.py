"""Helpers for the bench scripts: a live stack (uvicorn + q-cluster) on a dedicated database.

    with Stack.from_args(args) as stack:
        client = stack.client("alice")
        ...

What a stack does, in order:
  1. makes sure the database ``hitl_bench`` exists (``--fresh`` drops and recreates it);
  2. runs ``manage.py migrate`` and creates the users admin / approver / alice with
     ``manage.py hitl_user`` (the token is the last line of its stdout);
  3. starts uvicorn (``hitl_project.asgi:application``, ``--workers N``) and, unless told not to,
     a ``manage.py qcluster`` (``HITL_Q_WORKERS``), each in its own process group, with
     ``DATABASE_URL`` pointing at the bench database, ``HITL_DB_POOL=true`` and ``LOG_LEVEL=WARNING``;
  4. waits for ``/healthz``, then creates and deploys the ``account_bot()`` agent of
     tests/factories.py through the REST API;
  5. at exit (normal, exception, Ctrl-C or SIGTERM) stops both process groups.

Also here: ``summarize`` / ``print_latency`` (p50/p95/p99 in ms, mean, count); ``CostMeter``
(transactions and CPU per cycle of a timed run, with the load average) and ``Window`` (the timed
window of C client threads) for cycles.py and peer_cycles.py; ``process_groups()`` of a stack.
``--nodelay`` runs uvicorn with ``--http hitl_project.uvicorn_protocol:NoDelayH11Protocol``
(TCP_NODELAY on accepted sockets, which uvicorn leaves off with ``--workers``: uvicorn issue #3149).
"""

from __future__ import annotations

import argparse
import atexit
import math
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python")
if not Path(PYTHON).exists():  # run from another interpreter: use it for the children too
    PYTHON = sys.executable
LOG_DIR = ROOT / "var" / "log"

PG_HOST, PG_PORT, PG_USER = "127.0.0.1", 5432, "postgres"
DEFAULT_DB = "hitl_bench"
NODELAY_PROTOCOL = "hitl_project.uvicorn_protocol:NoDelayH11Protocol"
USERS = (("admin", "admin"), ("approver", "approver"), ("alice", "user"))


# --- latency figures ---------------------------------------------------------------------------


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """Latency figures of ``samples`` (seconds) in milliseconds: count, mean, p50, p95, p99, max.

    Percentiles by nearest rank on the sorted samples (the value below which that share of the
    samples fall), so p99 of 300 samples is the 297th smallest, an observed latency.
    """
    values = sorted(samples)
    count = len(values)
    if count == 0:
        return {"count": 0, "mean": math.nan, "p50": math.nan, "p95": math.nan, "p99": math.nan,
                "max": math.nan, "min": math.nan}

    def rank(p: float) -> float:
        return values[min(count - 1, max(0, math.ceil(p / 100 * count) - 1))] * 1000

    return {
        "count": count,
        "mean": statistics.fmean(values) * 1000,
        "min": values[0] * 1000,
        "p50": rank(50),
        "p95": rank(95),
        "p99": rank(99),
        "max": values[-1] * 1000,
    }


def format_latency(label: str, samples: Sequence[float]) -> str:
    s = summarize(samples)
    return (f"{label}: n={s['count']}  p50={s['p50']:.1f} ms  p95={s['p95']:.1f} ms  "
            f"p99={s['p99']:.1f} ms  mean={s['mean']:.1f} ms  max={s['max']:.1f} ms")


def print_latency(label: str, samples: Sequence[float]) -> None:
    print(format_latency(label, samples), flush=True)


def machine_line() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"machine: {os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


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
    return conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()").fetchone()[0]


def connect(dbname: str = DEFAULT_DB, **kwargs: Any) -> Any:
    import psycopg

    return psycopg.connect(conninfo(dbname), **kwargs)


def database_counts(dbname: str) -> dict[str, int]:
    """Cumulative counters of ``pg_stat_database``: transactions committed on ``dbname`` ("xact"),
    sessions opened on it ("sessions") and on every database of the server ("all_sessions").

    Every statement outside an explicit transaction counts as a transaction, read-only ones included.
    A backend reports its counts when it exits, or at most once a second while busy (PostgreSQL 15:
    an idle one up to 10 s later), so read this after the processes that did the work closed their
    connections (see ``wait_disconnected``).
    """
    with connect(dbname, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        xact, sessions, all_sessions = conn.execute(
            "SELECT sum(xact_commit) FILTER (WHERE datname = %s), sum(sessions) FILTER (WHERE datname = %s), "
            "sum(sessions) FROM pg_stat_database", (dbname, dbname)).fetchone()
    return {"xact": int(xact), "sessions": int(sessions), "all_sessions": int(all_sessions)}


def wait_disconnected(dbname: str, timeout: float = 10.0) -> int:
    """Waits until no other session is connected to ``dbname``; returns how many still are."""
    deadline = time.monotonic() + timeout
    with connect(dbname, autocommit=True) as conn:
        while True:
            left = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> "
                                "pg_backend_pid()", (dbname,)).fetchone()[0]
            if left == 0 or time.monotonic() > deadline:
                return left
            time.sleep(0.1)


# --- what a run costs: CPU from /proc, load average --------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")


def load_average() -> float:
    """The 1-minute load average."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def _stat_fields(pid: int) -> list[str] | None:
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return data[data.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses


def _pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def process_cpu(pid: int, *, reaped: bool = True) -> float:
    """CPU seconds of ``pid`` (utime + stime, all its threads), plus with ``reaped`` what its children
    that exited and were waited for used (cutime + cstime)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if reaped else 0)
    return ticks / CLK_TCK


def group_cpu(pgid: int) -> float:
    """CPU seconds of every live process of a process group, with their reaped children."""
    total = 0.0
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields is not None and int(fields[2]) == pgid:
            total += (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / CLK_TCK
    return total


def _postgres_processes(dbname: str) -> dict[tuple[int, int], tuple[str, float]]:
    """{(pid, start time): (kind, CPU seconds)} of the PostgreSQL processes on this machine.

    kind: "ours" (a backend or autovacuum worker of ``dbname``), "other" (a backend of another
    database), "background" (checkpointer, WAL writer...), "postmaster" (its CPU plus that of the
    backends it reaped: those that exited, of any database).
    """
    found: dict[tuple[int, int], tuple[str, float]] = {}
    for pid in _pids():
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != "postgres":
                continue
            title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = _stat_fields(pid)
        if fields is None:
            continue
        ticks = int(fields[11]) + int(fields[12])
        if not title.startswith("postgres:"):
            kind, ticks = "postmaster", ticks + int(fields[13]) + int(fields[14])
        elif f" {dbname} " in f"{title} ":
            kind = "ours"
        elif "(" in title or "[local]" in title or "autovacuum worker" in title:
            kind = "other"
        else:
            kind = "background"
        found[(pid, int(fields[19]))] = (kind, ticks / CLK_TCK)
    return found


def _machine_ticks() -> tuple[int, int]:
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return sum(values) - values[3] - values[4], sum(values)  # busy, total (idle and iowait are not busy)


METER_SESSIONS = 2


class CostMeter:
    """What a timed run cost, per cycle: PostgreSQL transactions and CPU, with the load average.

        meter = CostMeter(db=..., groups={"uvicorn": pgid, ...}, count_self=in_process)
        meter.begin()             # after the warm-up
        ... the run ...
        meter.end_cpu()           # while the process groups still live
        ... stop them, close this process's connections ...
        meter.end_transactions()  # once their backends are gone (their counts reported)
        meter.per_cycle(cycles)   # the figures; meter.lines(cycles) prints them

    Transactions: the ``xact_commit`` delta of the database; counts still pending in live backends
    at ``begin`` (at most their last second of warm-up) land in the run.

    CPU (utime + stime from /proc): the process groups named (every process of the group, with the
    children it reaped), this process when ``count_self`` (an in-process run serves the requests
    itself; over HTTP it is the client, shown apart, not counted), and PostgreSQL: the backends of
    the database, the background processes (checkpointer, WAL writer...) and a share of the backends
    that exited during the run. Those are the postmaster's reaped children, of every database; the
    run is given the share of them its database opened (sessions opened on it, less the meter's own
    two, over those opened on all databases), so other work on a shared machine adds little. Live
    backends of other databases are left out.
    """

    def __init__(self, *, db: str, groups: dict[str, int], count_self: bool) -> None:
        self.db = db
        self.groups = groups
        self.count_self = count_self
        self.figures: dict[str, float] = {}

    def _cpu(self) -> dict[str, Any]:
        return {
            "groups": {name: group_cpu(pgid) for name, pgid in self.groups.items()},
            "self": process_cpu(os.getpid(), reaped=False),
            "postgres": _postgres_processes(self.db),
            "machine": _machine_ticks(),
        }

    def begin(self) -> None:
        self.load_before = load_average()
        self.counts_before = database_counts(self.db)
        self.cpu_before = self._cpu()
        self.started = time.perf_counter()

    def end_cpu(self) -> None:
        self.wall = time.perf_counter() - self.started
        self.cpu_after = self._cpu()
        self.load_after = load_average()

    def end_transactions(self) -> None:
        wait_disconnected(self.db)
        self.counts_after = database_counts(self.db)

    def count(self, name: str) -> int:
        return self.counts_after[name] - self.counts_before[name]

    def postgres_cpu(self) -> dict[str, float]:
        """CPU seconds of PostgreSQL during the run by kind (see ``_postgres_processes``); "exited" is
        this database's share of the backends that exited."""
        spent = {"ours": 0.0, "background": 0.0, "postmaster": 0.0, "other": 0.0}
        before = self.cpu_before["postgres"]
        for key, (kind, seconds) in self.cpu_after["postgres"].items():
            spent[kind] += seconds - before.get(key, (kind, 0.0))[1]
        # The meter's own two short connections (begin's read, end's wait) are among the sessions counted.
        opened = max(0, self.count("sessions") - METER_SESSIONS)
        share = opened / self.count("all_sessions") if self.count("all_sessions") else 0.0
        spent["exited"] = spent["postmaster"] * share
        return spent

    def per_cycle(self, cycles: int) -> dict[str, float]:
        """The figures (CPU in ms per cycle), also kept in ``self.figures``."""
        per = 1000.0 / cycles if cycles else math.nan
        before, after = self.cpu_before, self.cpu_after
        groups = {name: (seconds - before["groups"].get(name, 0.0)) * per
                  for name, seconds in after["groups"].items()}
        own = (after["self"] - before["self"]) * per
        server = sum(groups.values()) + (own if self.count_self else 0.0)
        postgres = {kind: seconds * per for kind, seconds in self.postgres_cpu().items()}
        postgres_counted = postgres["ours"] + postgres["background"] + postgres["exited"]
        busy = after["machine"][0] - before["machine"][0]
        total = after["machine"][1] - before["machine"][1]
        self.figures = {
            "xact_per_cycle": self.count("xact") / cycles if cycles else math.nan,
            "sessions_per_cycle": self.count("sessions") / cycles if cycles else math.nan,
            "cpu_ms_per_cycle": server + postgres_counted,
            "server_cpu_ms_per_cycle": server,
            "postgres_cpu_ms_per_cycle": postgres_counted,
            "postgres_exited_cpu_ms_per_cycle": postgres["exited"],
            "postgres_exited_all_cpu_ms_per_cycle": postgres["postmaster"],
            "self_cpu_ms_per_cycle": own,
            "machine_busy_pct": 100.0 * busy / total if total else math.nan,
            "load1_before": self.load_before,
            "load1_after": self.load_after,
            **{f"{name}_cpu_ms_per_cycle": value for name, value in groups.items()},
        }
        return self.figures

    def lines(self, cycles: int) -> list[str]:
        f = self.per_cycle(cycles)
        load = f"[load {self.load_before:.2f} -> {self.load_after:.2f}]"
        parts = [f"{name} {f[f'{name}_cpu_ms_per_cycle']:.1f}" for name in self.groups]
        if self.count_self:
            parts.append(f"this process {f['self_cpu_ms_per_cycle']:.1f}")
        parts.append(f"postgres {f['postgres_cpu_ms_per_cycle']:.1f}")
        lines = [
            f"transactions per cycle: {f['xact_per_cycle']:.1f} (xact_commit delta {self.count('xact')} on "
            f"{self.db} / {cycles} cycles) {load}",
            f"CPU per cycle: {f['cpu_ms_per_cycle']:.1f} ms ({', '.join(parts)}) {load}",
            f"  postgres: {f['postgres_exited_cpu_ms_per_cycle']:.1f} of it exited backends "
            f"({self.count('sessions') - METER_SESSIONS} of the {self.count('all_sessions')} sessions opened "
            f"on the server during the run were on {self.db}, besides this meter's; all exited backends: "
            f"{f['postgres_exited_all_cpu_ms_per_cycle']:.1f})",
        ]
        if not self.count_self:
            lines.append(f"  the client (this process, not counted): {f['self_cpu_ms_per_cycle']:.1f} ms "
                         "per cycle")
        lines.append(f"machine: {f['machine_busy_pct']:.0f} % busy during the run ({self.wall:.1f} s); "
                     f"1-min load average {self.load_before:.2f} before, {self.load_after:.2f} after")
        return lines


class Window:
    """The timed window shared by the client threads: each warms up, then waits at ``ready``; the
    last to arrive starts the meter and the clock. After ``duration`` seconds each finishes its cycle
    and waits at ``finished``, where the last reads the CPU before anyone closes a connection."""

    def __init__(self, *, clients: int, duration: float, meter: CostMeter) -> None:
        self.duration = duration
        self.until = 0.0
        self.meter = meter
        self.ready = threading.Barrier(clients + 1, action=self.start)
        self.finished = threading.Barrier(clients + 1, action=meter.end_cpu)

    def start(self) -> None:
        self.meter.begin()
        self.until = time.perf_counter() + self.duration

    def wait(self, *, timeout: float = 300.0) -> None:
        """The main thread's part in both barriers (a client that never arrives breaks them)."""
        self.ready.wait(timeout=timeout)
        self.finished.wait(timeout=self.duration + timeout)


# --- processes ---------------------------------------------------------------------------------


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


def _raise_exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


# --- the stack ---------------------------------------------------------------------------------


def add_stack_args(parser: argparse.ArgumentParser, *, workers: int = 1, q_workers: int = 2,
                   qcluster: bool = True) -> None:
    group = parser.add_argument_group("stack")
    group.add_argument("--workers", type=int, default=workers, help=f"uvicorn workers (default {workers})")
    group.add_argument("--q-workers", type=int, default=q_workers,
                       help=f"q-cluster workers, HITL_Q_WORKERS (default {q_workers})")
    if qcluster:
        group.add_argument("--no-qcluster", dest="qcluster", action="store_false",
                           help="do not start a q-cluster")
    else:
        group.add_argument("--qcluster", dest="qcluster", action="store_true",
                           help="also start a q-cluster")
    group.add_argument("--fresh", action="store_true", help=f"drop and recreate the database {DEFAULT_DB}")
    group.add_argument("--db", default=DEFAULT_DB, help=f"database name (default {DEFAULT_DB})")
    group.add_argument("--port", type=int, default=0, help="uvicorn port (default: a free one)")
    group.add_argument("--nodelay", action="store_true",
                       help=f"uvicorn --http {NODELAY_PROTOCOL} (TCP_NODELAY; uvicorn issue #3149)")
    group.add_argument("--qcluster-pool", action="store_true",
                       help="run the q-cluster with HITL_DB_POOL=true too (it breaks: see Stack.start_qcluster)")
    group.add_argument("--q-conn-max-age", type=int, default=0, metavar="SECONDS",
                       help="CONN_MAX_AGE of the q-cluster (in its DATABASE_URL); default: the settings' (0)")
    group.add_argument("--pool-max", type=int, default=20, help="HITL_DB_POOL_MAX per web process (default 20)")


class Stack:
    def __init__(self, *, workers: int = 1, q_workers: int = 2, qcluster: bool = True, fresh: bool = False,
                 db: str = DEFAULT_DB, port: int = 0, nodelay: bool = False, pool_max: int = 20,
                 qcluster_pool: bool = False, q_conn_max_age: int = 0, quiet: bool = False) -> None:
        self.workers = workers
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
            "workers": args.workers, "q_workers": args.q_workers, "qcluster": args.qcluster,
            "fresh": args.fresh, "db": args.db, "port": args.port, "nodelay": args.nodelay,
            "pool_max": args.pool_max, "qcluster_pool": args.qcluster_pool,
            "q_conn_max_age": args.q_conn_max_age,
        }
        options.update(overrides)
        return cls(**options)

    # -- lifecycle

    def log(self, message: str) -> None:
        if not self.quiet:
            print(f"[stack] {message}", file=sys.stderr, flush=True)

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "DATABASE_URL": database_url(self.db),
            "HITL_DB_POOL": "true",
            "HITL_DB_POOL_MAX": str(self.pool_max),
            "LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "hitl_project.settings.base",
            "HITL_Q_WORKERS": str(self.q_workers),
        })
        env.update(extra)
        return env

    def manage(self, *argv: str, pool: bool = False) -> str:
        env = self.env()
        if not pool:
            env["HITL_DB_POOL"] = "false"
        result = subprocess.run([PYTHON, "manage.py", *argv], cwd=ROOT, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            sys.stderr.write(result.stdout + result.stderr)
            raise RuntimeError(f"manage.py {' '.join(argv)} failed ({result.returncode})")
        return result.stdout

    def __enter__(self) -> Stack:
        atexit.register(self.stop)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, _raise_exit)
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
        uvicorn = [PYTHON, "-m", "uvicorn", "hitl_project.asgi:application", "--host", "127.0.0.1",
                   "--port", str(self.port), "--workers", str(self.workers), "--log-level", "warning",
                   "--no-access-log"]
        if self.nodelay:
            uvicorn += ["--http", NODELAY_PROTOCOL]
        self._spawn("uvicorn", uvicorn)
        if self.with_qcluster:
            self.start_qcluster()
        self.wait_healthy()
        self.agent_id = self.create_agent()
        self.log(f"uvicorn --workers {self.workers}{' (TCP_NODELAY)' if self.nodelay else ''} on {self.url}"
                 f"{f', q-cluster with {self.q_workers} workers' if self.with_qcluster else ''}; "
                 f"agent {self.agent_id} ({time.monotonic() - t0:.1f} s)")

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
        proc = subprocess.Popen(argv, cwd=ROOT, env=self.env(**env), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
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
        client = httpx.Client(base_url=self.url, headers={"Authorization": f"Token {self.tokens[user]}"}, **options)
        self._clients.append(client)
        return client

    def create_agent(self) -> str:
        document = account_bot_document(self.db)
        admin = self.client("admin")
        response = admin.post("/agentstore/agents", json=document)
        response.raise_for_status()
        agent_id = response.json()["id"]
        version = response.json()["version"]
        admin.post(f"/administration/production/deploy/{agent_id}", params={"version": version}).raise_for_status()
        return agent_id


def account_bot_document(db: str = DEFAULT_DB) -> dict[str, Any]:
    """tests.factories.account_bot(): importing it needs Django set up (it imports the services).

    Django is set up in this process against the bench database ``db`` (no pool), so scripts may
    also use the ORM or Django's test client afterwards.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings.base")
    os.environ["DATABASE_URL"] = database_url(db)
    os.environ.pop("HITL_DB_POOL", None)
    os.environ.setdefault("LOG_LEVEL", "WARNING")  # else httpx logs every request through Django's root logger
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from tests.factories import account_bot

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
