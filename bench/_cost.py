"""What a timed bench run costs, measured the same way for ours and the peer (cycles.py, peer_cycles.py).

``CostMeter``: PostgreSQL transactions (``pg_stat_database.xact_commit``) and CPU (process groups from
/proc, the bench process when in process, PostgreSQL's backends of the database) per cycle, with the
1-minute load average. ``Window``: the timed window of C client threads. ``report_figures``: the
closing lines and the ``--json`` figures both scripts print.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _figures import summarize
from _stack import connect


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
            "sum(sessions) FROM pg_stat_database",
            (dbname, dbname),
        ).fetchone()
    return {"xact": int(xact), "sessions": int(sessions), "all_sessions": int(all_sessions)}


def wait_disconnected(dbname: str, timeout: float = 10.0) -> int:
    """Waits until no other session is connected to ``dbname``; returns how many still are."""
    deadline = time.monotonic() + timeout
    with connect(dbname, autocommit=True) as conn:
        while True:
            left = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,),
            ).fetchone()[0]
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
    return data[data.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses


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


def group_processes_cpu(pgid: int) -> dict[tuple[int, int], float]:
    """{(pid, start time): CPU seconds} of each live process of a process group (no reaped children)."""
    found: dict[tuple[int, int], float] = {}
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields is not None and int(fields[2]) == pgid:
            found[(pid, int(fields[19]))] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return found


def busiest_share(before: dict[tuple[int, int], float], after: dict[tuple[int, int], float]) -> float:
    """The share of a group's CPU during the run that its busiest process took (1.0: one process did
    all of it). A server's workers split the work only as its connections were split among them."""
    spent = [seconds - before.get(key, 0.0) for key, seconds in after.items()]
    total = sum(spent)
    return max(spent) / total if total > 0 else math.nan


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

    Also the share of a web server's CPU its busiest process took (``busiest_share``): how evenly the
    server's workers split the run, which follows how the clients' connections were split among them.
    """

    def __init__(self, *, db: str, groups: dict[str, int], count_self: bool) -> None:
        self.db = db
        self.groups = groups
        self.count_self = count_self
        self.figures: dict[str, float] = {}

    def _cpu(self) -> dict[str, Any]:
        return {
            "groups": {name: group_cpu(pgid) for name, pgid in self.groups.items()},
            "processes": {name: group_processes_cpu(pgid) for name, pgid in self.groups.items()},
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
        groups = {
            name: (seconds - before["groups"].get(name, 0.0)) * per
            for name, seconds in after["groups"].items()
        }
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
            **{
                f"{name}_busiest_process_share": busiest_share(before["processes"][name], processes)
                for name, processes in after["processes"].items()
            },
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
        shares = [
            f"{name} {100 * f[f'{name}_busiest_process_share']:.0f} %"
            for name in self.groups
            # a server with two workers or more that did the run's work (not one idle beside an in-process run)
            if name != "qcluster"
            and len(self.cpu_after["processes"][name]) > 2
            and f[f"{name}_cpu_ms_per_cycle"] >= 1.0
        ]
        if shares:
            lines.append(f"  the busiest process's share of its server's CPU: {', '.join(shares)}")
        if not self.count_self:
            lines.append(
                f"  the client (this process, not counted): {f['self_cpu_ms_per_cycle']:.1f} ms per cycle"
            )
        lines.append(
            f"machine: {f['machine_busy_pct']:.0f} % busy during the run ({self.wall:.1f} s); "
            f"1-min load average {self.load_before:.2f} before, {self.load_after:.2f} after"
        )
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

    def client(
        self, cycle: Callable[[Any], None], *, warmup: int, results: Any, scratch: Callable[[], Any]
    ) -> None:
        """One client thread's part: ``warmup`` cycles into throwaway results (``scratch()``), then cycles
        into ``results`` until the window closes. A failed cycle is counted in ``results.errors`` (under
        ``results.lock``) and the loop goes on: the figures say how many failed."""
        for _ in range(warmup):
            try:
                cycle(scratch())
            except Exception as exc:
                with results.lock:
                    results.errors[f"warm-up: {str(exc)[:150]}"] += 1
        self.ready.wait()
        while time.perf_counter() < self.until:
            try:
                cycle(results)
            except Exception as exc:
                with results.lock:
                    results.errors[str(exc)[:160]] += 1
        self.finished.wait()


# --- processes ---------------------------------------------------------------------------------


def report_figures(
    *,
    errors: Any,
    cycles: int,
    wall: float,
    cycle_samples: list[float],
    resume_samples: list[float],
    meter: CostMeter,
    json_path: str | None,
) -> None:
    """Print the errors of a run and, with ``json_path``, write its figures for compare_peer.py."""
    print(f"errors: {sum(errors.values())}")
    for message, count in errors.most_common(5):
        print(f"  {count} x {message}")
    if json_path:
        cycle, resume = summarize(cycle_samples), summarize(resume_samples)
        figures = {
            "cycles_per_s": cycles / wall,
            "cycles": cycles,
            "errors": sum(errors.values()),
            "cycle_p50_ms": cycle["p50"],
            "cycle_p95_ms": cycle["p95"],
            "resume_p50_ms": resume["p50"],
            "resume_p95_ms": resume["p95"],
            **meter.figures,
        }
        with open(json_path, "w") as f:
            json.dump(figures, f, indent=1)
