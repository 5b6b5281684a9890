"""Helpers for the live fault tests: extra q-clusters with their own settings, process lookups, a slow
HTTP target, and the REST steps that build paused conversations.

Test modules take the fixtures ``clusters`` and ``slow_target`` by assignment
(``from harnesses import clusters as live_clusters``; ``clusters = live_clusters.clusters``).
A q-cluster started here is a real ``manage.py qcluster`` in its own process group, on the test
database of the ``live_stack`` fixture, with extra environment (e.g. a short continuation lease): the
default cluster, or with ``cluster=settings.HITL_TIMER_CLUSTER`` a timer cluster.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from harnesses.live_stack import STARTUP_TIMEOUT, LiveStack, ServerProcess

PROBE_FUNC = "os.getpid"


# --- processes ---------------------------------------------------------------------------------


def process_group_of(pid: int) -> int | None:
    """The process group of ``pid`` from /proc (None when the process is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[2])  # fields after "(comm)": state, ppid, pgrp


def pids_in_group(pgid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and process_group_of(int(entry)) == pgid:
            pids.append(int(entry))
    return sorted(pids)


def _socket_inode(local_port: int, remote_port: int) -> str | None:
    """The inode of the loopback TCP socket 127.0.0.1:local_port -> 127.0.0.1:remote_port."""
    local, remote = f"0100007F:{local_port:04X}", f"0100007F:{remote_port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == local and fields[2] == remote:
            return fields[9]
    return None


def pid_of_connection(client_port: int, server_port: int, candidates: list[int]) -> int | None:
    """Which of ``candidates`` holds the client end of a loopback connection to ``server_port``."""
    inode = _socket_inode(client_port, server_port)
    if inode is None:
        return None
    wanted = f"socket:[{inode}]"
    for pid in candidates:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == wanted:
                    return pid
            except OSError:
                continue
    return None


def kill_group(process: ServerProcess) -> list[int]:
    """SIGKILL a q-cluster's whole process group at once; returns the pids that were in it."""
    pgid = process.popen.pid
    pids = pids_in_group(pgid)
    os.killpg(pgid, signal.SIGKILL)
    process.popen.wait(timeout=10)
    return pids


# --- q-clusters --------------------------------------------------------------------------------


@dataclass
class Clusters:
    """q-clusters started by one test, stopped (process groups killed) at its end."""

    stack: LiveStack
    started: list[ServerProcess] = field(default_factory=list)
    _count: int = 0

    def start(self, label: str, *, cluster: str | None = None, **extra_env: Any) -> ServerProcess:
        """Start ``manage.py qcluster`` with extra settings (``cluster``: its Q_CLUSTER_NAME, None for
        the default cluster); return once one of ITS workers ran a task."""
        self._count += 1
        env = {**self.stack.env, **{key: str(value) for key, value in extra_env.items()}}
        process = ServerProcess.spawn(
            f"qcluster-{label}-{self._count}",
            [sys.executable, "manage.py", "qcluster"],
            env=env,
            log_dir=self.stack.log_dir,
            cluster=cluster,
        )
        self.started.append(process)
        self.wait_working(process)
        return process

    def wait_working(self, process: ServerProcess, timeout: float = STARTUP_TIMEOUT) -> int:
        """Enqueue ``os.getpid`` probes on the queue of ``process``'s cluster until one is run by a worker
        of ``process``; return that pid.

        With several clusters on one queue a probe may be taken by any of them, so keep sending.
        """
        from django_q.models import Task
        from django_q.tasks import async_task

        group = f"e2e-probe-{process.name}"
        deadline = time.monotonic() + timeout
        next_probe = 0.0
        with self.stack.db_blocker.unblock():
            while True:
                if not process.running:
                    process.fail_startup("the q-cluster exited")
                now = time.monotonic()
                if now >= next_probe:
                    async_task(PROBE_FUNC, task_name=group, group=group, cluster=process.cluster)
                    next_probe = now + 0.5
                for pid in Task.objects.filter(group=group).values_list("result", flat=True):
                    if isinstance(pid, int) and process_group_of(pid) == process.popen.pid:
                        return pid
                if now >= deadline:
                    process.fail_startup(f"none of its workers ran a probe within {timeout:.0f}s")
                time.sleep(0.1)

    def stop_all(self) -> None:
        """Stop every cluster at once (each takes up to its grace period: a drainer is always busy)."""
        stoppers = [threading.Thread(target=process.stop) for process in self.started]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join(timeout=30)
        self.started.clear()

    def output(self) -> str:
        return "\n".join(process.output(limit=4000) for process in self.started)


@pytest.fixture
def clusters(request, live_stack: LiveStack) -> Iterator[Clusters]:
    """Extra q-clusters for one test. The fixture's own q-clusters are stopped while they run (a test
    that wants them too restarts them) and restarted afterwards, so later tests find the stack as it was."""
    live_stack.stop_qcluster()
    own = Clusters(stack=live_stack)
    try:
        yield own
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            print(own.output())
        own.stop_all()
        live_stack.start_qcluster()


# --- a slow HTTP target ------------------------------------------------------------------------


@dataclass
class SlowTarget:
    """A loopback HTTP server that records each request, then holds it ``hold_seconds`` before 200."""

    hold_seconds: float = 10.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    received: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_port}"

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.server_port

    def start(self) -> SlowTarget:
        target = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                target.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "at": time.time(),
                        "client_port": self.client_address[1],
                    }
                )
                target.received.set()
                target.release.wait(target.hold_seconds)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "11")
                    self.end_headers()
                    self.wfile.write(b'{"ok":true}')
                except OSError:
                    pass  # the caller is gone (killed): nothing to answer

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def slow_target() -> Iterator[SlowTarget]:
    target = SlowTarget().start()
    try:
        yield target
    finally:
        target.stop()


# --- REST steps --------------------------------------------------------------------------------


def deploy_agent(admin: httpx.Client, document: dict[str, Any]) -> str:
    created = admin.post("/agentstore/agents", json=document)
    assert created.status_code == 201, created.text
    agent_id = created.json()["id"]
    deployed = admin.post(f"/administration/production/deploy/{agent_id}")
    assert deployed.status_code == 200, deployed.text
    return agent_id


def paused_conversation(owner: httpx.Client, agent_id: str) -> str:
    started = owner.post(f"/agents/{agent_id}/start")
    assert started.status_code == 201, started.text
    conversation_id = started.json()["conversationId"]
    said = owner.post(f"/agents/{conversation_id}", json={"input": "please delete my account"})
    assert said.status_code == 200, said.text
    assert said.json()["state"] == "AWAITING_HUMAN", said.json()
    return conversation_id


def with_http_call(document: dict[str, Any], target_url: str) -> dict[str, Any]:
    """The agent document with an httpcalls task fired by ``confirm_deletion`` (the approved action)."""
    document["workflows"][0]["tasks"].insert(
        2,
        {
            "id": "delete",
            "type": "httpcalls",
            "targetServerUrl": target_url,
            "calls": [
                {
                    "name": "deleteAccount",
                    "actions": ["confirm_deletion"],
                    "request": {"method": "DELETE", "path": "/accounts/me"},
                }
            ],
        },
    )
    return document
