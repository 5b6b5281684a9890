"""A live stack on the test database: uvicorn and real django-q2 q-clusters as other processes.

The stack runs the deployed topology (docs/operations.md): the default q-cluster for continuations and
the timer cluster (``Q_CLUSTER_NAME=hitl-timers``) for timers and recovery. Its processes keep
django-q2's successful task rows (``HITL_Q_SAVE_LIMIT=0``; production keeps none) so a harness can see
which task ran and what it returned. The server and the clusters see only committed rows.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from django.conf import settings
from django.db import connection
from rest_framework.authtoken.models import Token

from harnesses.users import make_user

PROJECT_ROOT = Path(settings.BASE_DIR)
STARTUP_TIMEOUT = 60.0
STOP_GRACE_SECONDS = 3.0


def eventually(
    check: Callable[[], Any], *, timeout: float, interval: float = 0.1, what: str = "condition"
) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds with the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last value: {last!r}")
        time.sleep(interval)


def api_user(username: str, role: str = "user") -> str:
    """Create a committed user of ``role`` (user, approver, admin) and return its API token."""
    user = make_user(username, role)
    return Token.objects.get(user=user).key


def database_url() -> str:
    """The URL of the database pytest-django created (test_<name>), for the server processes."""
    db = connection.settings_dict
    credentials = quote(db.get("USER") or "postgres", safe="")
    if db.get("PASSWORD"):
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{credentials}@{host}:{port}/{db['NAME']}"


def uvicorn_command(port: int) -> list[str]:
    """The one web process of the live tests: uvicorn on loopback ``port``, quiet, as ./scripts/start runs
    it (uvloop, httptools)."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "hitl_project.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--log-level",
        "warning",
        "--no-access-log",
    ]


def granian_command(port: int) -> list[str]:
    """granian's WSGI interface serving the REST API and the admin alone (``hitl_project.wsgi``), as
    docs/operations.md runs it: one worker of two blocking threads on loopback ``port``, quiet."""
    return [
        sys.executable,
        "-m",
        "granian",
        "--interface",
        "wsgi",
        "hitl_project.wsgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--blocking-threads",
        "2",
        "--log-level",
        "warning",
    ]


SERVER_COMMANDS = {"uvicorn": uvicorn_command, "granian": granian_command}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ServerProcess:
    """A subprocess in its own process group, its output captured to files."""

    name: str
    popen: subprocess.Popen
    stdout_path: Path
    stderr_path: Path
    cluster: str | None = None  # a q-cluster's Q_CLUSTER_NAME (None: the default cluster)

    @classmethod
    def spawn(
        cls, name: str, args: list[str], *, env: dict[str, str], log_dir: Path, cluster: str | None = None
    ) -> ServerProcess:
        if cluster is not None:
            env = {**env, "Q_CLUSTER_NAME": cluster}
        stdout_path = log_dir / f"{name}.stdout.log"
        stderr_path = log_dir / f"{name}.stderr.log"
        with open(stdout_path, "ab") as out, open(stderr_path, "ab") as err:
            popen = subprocess.Popen(
                args,
                cwd=PROJECT_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        return cls(name=name, popen=popen, stdout_path=stdout_path, stderr_path=stderr_path, cluster=cluster)

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def output(self, limit: int = 8000) -> str:
        text = ""
        for label, path in (("stderr", self.stderr_path), ("stdout", self.stdout_path)):
            content = path.read_text(errors="replace") if path.exists() else ""
            text += f"--- {self.name} {label} ---\n{content[-limit:]}\n"
        return text

    def fail_startup(self, why: str) -> None:
        code = self.popen.poll()
        self.stop()
        pytest.fail(f"{self.name} did not start ({why}; exit code {code})\n{self.output()}", pytrace=False)

    def stop(self) -> None:
        """SIGTERM the whole process group, then SIGKILL it (a q-cluster's children outlive its parent)."""
        pgid = self.popen.pid  # start_new_session: the leader's pid is the group id
        _signal_group(pgid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        _signal_group(pgid, signal.SIGKILL)
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class LiveStack:
    """uvicorn (or granian: ``server_kind``) and a q-cluster against the test database; ``base_url`` is
    the server's address."""

    env: dict[str, str]
    log_dir: Path
    db_blocker: Any
    server_kind: str = "uvicorn"
    base_url: str = ""
    server: ServerProcess | None = None
    qcluster: ServerProcess | None = None
    timer_cluster: ServerProcess | None = None
    _cluster_runs: int = field(default=0)

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Token {token}"} if token else {}
        return httpx.Client(
            base_url=self.base_url, headers=headers, timeout=kwargs.pop("timeout", 60.0), **kwargs
        )

    def start_server(self) -> None:
        for _attempt in range(3):
            port = free_port()
            self.server = ServerProcess.spawn(
                self.server_kind, SERVER_COMMANDS[self.server_kind](port), env=self.env, log_dir=self.log_dir
            )
            self.base_url = f"http://127.0.0.1:{port}"
            if self._wait_for_health():
                return
            if "address already in use" not in self.server.output().lower():
                self.server.fail_startup("/healthz never answered 200")
            self.server.stop()  # lost the port to someone else: try another one
        assert self.server is not None
        self.server.fail_startup("no free port")

    def _wait_for_health(self) -> bool:
        assert self.server is not None
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if not self.server.running:
                return False
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=2.0).status_code == 200:
                    return True
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        return False

    def start_qcluster(self) -> None:
        """Start the default q-cluster and the timer cluster; wait until each has run a probe task
        taken from its queue of the ORM broker.

        The probes are committed to the database, so call this only from a module-scoped fixture or a
        ``transaction=True`` test.
        """
        self._cluster_runs += 1
        self.qcluster = ServerProcess.spawn(
            f"qcluster-{self._cluster_runs}",
            [sys.executable, "manage.py", "qcluster"],
            env=self.env,
            log_dir=self.log_dir,
        )
        self.timer_cluster = ServerProcess.spawn(
            f"qcluster-timers-{self._cluster_runs}",
            [sys.executable, "manage.py", "qcluster"],
            env=self.env,
            log_dir=self.log_dir,
            cluster=settings.HITL_TIMER_CLUSTER,
        )
        self._wait_for_probe(self.qcluster)
        self._wait_for_probe(self.timer_cluster)

    def _wait_for_probe(self, process: ServerProcess) -> None:
        from django_q.models import Task
        from django_q.tasks import async_task

        with self.db_blocker.unblock():
            probe = async_task(
                "math.floor",
                1.5,
                task_name=f"e2e-probe-{process.name}",
                group="e2e-probe",
                cluster=process.cluster,
            )
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while not Task.objects.filter(id=probe).exists():
                if not process.running:
                    process.fail_startup("the q-cluster exited")
                if time.monotonic() >= deadline:
                    process.fail_startup(f"it ran no probe task within {STARTUP_TIMEOUT:.0f}s")
                time.sleep(0.1)

    def stop_qcluster(self) -> None:
        """Stop both q-clusters (the default one and the timer cluster)."""
        for process in (self.qcluster, self.timer_cluster):
            if process is not None:
                process.stop()
        self.qcluster = self.timer_cluster = None

    def stop(self) -> None:
        self.stop_qcluster()
        if self.server is not None:
            self.server.stop()
            self.server = None


def running_stack(
    django_db_blocker, log_dir: Path, *, qclusters: bool = True, server: str = "uvicorn", **extra_env: str
) -> Iterator[LiveStack]:
    """uvicorn (``server="granian"``: granian's WSGI interface) and both q-clusters (``qclusters=False``:
    the server alone) on the test database (``extra_env`` on top), stopped when done."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hitl_project.settings.test",
        "DATABASE_URL": database_url(),
        "HITL_Q_SYNC": "false",
        "HITL_Q_SAVE_LIMIT": "0",  # keep every task's result row, without pruning: tests read them
        "PYTHONUNBUFFERED": "1",
        **extra_env,
    }
    stack = LiveStack(env=env, log_dir=log_dir, db_blocker=django_db_blocker, server_kind=server)
    try:
        stack.start_server()
        if qclusters:
            stack.start_qcluster()
        yield stack
    finally:
        stack.stop()
        _drop_queued_work(django_db_blocker)


def _drop_queued_work(django_db_blocker) -> None:
    """What the q-clusters queued while they stopped, after the last test's flush: a worker that
    (re)starts queues crash recovery and a timer drainer. Left in the broker, the next test would find
    them among its own tasks."""
    from django_q.models import OrmQ

    with django_db_blocker.unblock():
        OrmQ.objects.all().delete()
