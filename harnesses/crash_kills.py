"""Crash safety under random SIGKILLs (docs/reliability.md, R3): the harness of tests/e2e/test_crash_kills.py and
bench/crash_kills.py.

A fleet of web processes (uvicorn) and q-clusters (the default cluster and the timer cluster, the
deployed topology of docs/operations.md), each in its own process group on the test database. Driver
threads run approval cycles over HTTP with httpx while a killer, driven by a seeded ``random.Random``,
SIGKILLs (``os.killpg``) a web or q-cluster group and starts a new one in its place.

One cycle is one conversation of the crash agent (``crash_agent``): say "please delete my account and
transfer 100 ref <token>" → a RULE pause; approve → the continuation sends ``POST /notify/<token>`` (an
action-triggered http call, journaled) and its model asks for ``transfer_funds`` → a TOOL_CALL pause;
approve → the tool sends ``POST /transfers/<token>`` and the model answers ``Done: …``. Each approval is
sent at random with ``?wait`` (the web process runs the continuation) or without (the q-cluster does).
``<token>`` is new for every say, so a request the recorder sees twice was sent twice.

The driver never trusts a request that failed: it reads the conversation again and does what its
state asks for (wait while a turn runs, approve a pending pause, say again after an interrupted turn).

Half the kills, at random, are aimed: the killer waits until the recorder holds a request in flight
and kills the process group that sent it (found from /proc), so the window between a journal claim
and its result is hit for certain, not by luck.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from harnesses.agents import AFTER_TOOLS, payments_agent
from harnesses.clusters import pid_of_connection, pids_in_group
from harnesses.live_stack import ServerProcess, free_port, uvicorn_command

# Short leases and a quick re-delivery, so a killed continuation is back within seconds (the defaults
# are 15 s leases and 360 s retry). Every process gets them: the lease is written by whoever claims.
CRASH_ENV = {
    "HITL_CONTINUATION_LEASE_SECONDS": "3",
    "HITL_LEASE_RENEW_SECONDS": "0.5",
    "HITL_LEASE_SWEEP_SECONDS": "1",
    "HITL_Q_TIMEOUT": "6",
    "HITL_Q_RETRY": "7",
    "HITL_TIMER_DRAIN_SECONDS": "3",
    "HITL_Q_SAVE_LIMIT": "-1",
}
USABLE_WITHIN_SECONDS = 30.0
STALLED_SECONDS = 2 * USABLE_WITHIN_SECONDS  # a driver whose conversation takes nothing this long fails
SAY = "please delete my account and transfer 100 ref {token}"


def crash_agent(recorder_url: str) -> dict[str, Any]:
    """The account bot whose approved deletion calls ``/notify/<token>`` and then asks a scripted model,
    which calls the gated tool ``transfer_funds`` (``POST /transfers/<token>``)."""
    document = payments_agent(
        recorder_url,
        script=[
            AFTER_TOOLS,
            {
                "when": {"inputContains": "transfer"},
                "toolCalls": [
                    {"id": "call-1", "name": "transfer_funds", "arguments": {"amount": 100, "to": "bob"}}
                ],
            },
            {"reply": "How can I help?"},
        ],
    )
    llm, payments = document["workflows"][0]["tasks"]
    payments["calls"][0]["request"]["path"] = "/transfers/{context.token}"
    notify = {
        "id": "notify",
        "type": "httpcalls",
        "targetServerUrl": recorder_url,
        "calls": [
            {
                "name": "call_notify",
                "actions": ["confirm_deletion"],
                "request": {
                    "method": "POST",
                    "path": "/notify/{context.token}",
                    "body": {"event": "deleted"},
                },
            }
        ],
    }
    bot = {
        "name": "crash-bot",
        "workflows": [
            {
                "id": "main",
                "tasks": [
                    {
                        "id": "parse",
                        "type": "parser",
                        "dictionaries": [
                            {"phrase": "delete my account", "expressions": "delete_account(me)"},
                            {"word": "hello", "expressions": "greeting(hello)"},
                        ],
                    },
                    {
                        "id": "rules",
                        "type": "behavior_rules",
                        "rules": [
                            {
                                "name": "Pause for deletion approval",
                                "actions": ["PAUSE_CONVERSATION", "confirm_deletion"],
                                "conditions": [
                                    {"type": "inputmatcher", "configs": {"expressions": "delete_account(*)"}}
                                ],
                            }
                        ],
                    },
                    notify,
                    llm,
                    payments,
                    {
                        "id": "output",
                        "type": "output",
                        "outputs": [
                            {
                                "action": "confirm_deletion",
                                "texts": ["Deletion {memory.current.hitlDecision}."],
                            }
                        ],
                    },
                ],
            }
        ],
        "hitlConfig": {**document["hitlConfig"], "pauseReason": "Deletion and transfer need sign-off"},
    }
    return bot


# --- the recorder --------------------------------------------------------------------------------


@dataclass
class Recorder:
    """A loopback HTTP server that records every request and holds it ``hold_seconds`` before its 200;
    ``in_flight`` are the client ports of requests received and not yet answered."""

    hold_seconds: float = 0.4
    received: list[tuple[str, str]] = field(default_factory=list)
    in_flight: dict[int, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.server_port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Recorder:
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                port = self.client_address[1]
                with recorder.lock:
                    recorder.received.append((self.command, self.path))
                    recorder.in_flight[port] = self.path
                time.sleep(recorder.hold_seconds)
                with recorder.lock:
                    recorder.in_flight.pop(port, None)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "11")
                    self.end_headers()
                    self.wfile.write(b'{"ok":true}')
                except OSError:
                    pass  # the caller was killed

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def sent_twice(self) -> dict[str, int]:
        with self.lock:
            counts = Counter(path for _method, path in self.received)
        return {path: n for path, n in counts.items() if n > 1}


# --- the fleet -----------------------------------------------------------------------------------


@dataclass
class Member:
    """One web process or q-cluster of the fleet: ``kind`` is web, worker (default cluster) or timers."""

    kind: str
    slot: int
    process: ServerProcess
    url: str = ""


@dataclass
class Fleet:
    env: dict[str, str] = field(repr=False)
    log_dir: Path
    timer_cluster: str
    members: list[Member] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _spawned: int = 0

    def start(self, *, webs: int, clusters: int) -> None:
        for slot in range(clusters):
            self.spawn("worker", slot)
            self.spawn("timers", slot)
        for slot in range(webs):
            self.spawn("web", slot)

    def spawn(self, kind: str, slot: int) -> Member:
        self._spawned += 1
        name = f"{kind}{slot}-{self._spawned}"
        if kind != "web":
            process = ServerProcess.spawn(
                name,
                [sys.executable, "manage.py", "qcluster"],
                env=self.env,
                log_dir=self.log_dir,
                cluster=self.timer_cluster if kind == "timers" else None,
            )
            member = Member(kind, slot, process)
        else:
            member = self._spawn_web(name, slot)
        with self.lock:
            self.members.append(member)
        return member

    def _spawn_web(self, name: str, slot: int) -> Member:
        for _attempt in range(3):
            port = free_port()
            process = ServerProcess.spawn(name, uvicorn_command(port), env=self.env, log_dir=self.log_dir)
            url = f"http://127.0.0.1:{port}"
            if _healthy(process, url):
                return Member("web", slot, process, url)
            process.stop()
            if "address already in use" not in process.output().lower():
                raise RuntimeError(f"{name} did not start\n{process.output()}")
        raise RuntimeError(f"{name}: no free port")

    def web_urls(self) -> list[str]:
        with self.lock:
            return [m.url for m in self.members if m.kind == "web" and m.process.running]

    def live(self) -> list[Member]:
        with self.lock:
            return [m for m in self.members if m.process.running]

    def holder_of(self, client_port: int, server_port: int) -> Member | None:
        for member in self.live():
            if pid_of_connection(client_port, server_port, pids_in_group(member.process.popen.pid)):
                return member
        return None

    def kill(self, member: Member) -> None:
        """SIGKILL the member's whole process group; it leaves the fleet."""
        with self.lock:
            self.members.remove(member)
        try:
            os.killpg(member.process.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        member.process.popen.wait(timeout=10)

    def stop(self) -> None:
        stoppers = [threading.Thread(target=m.process.stop) for m in self.live()]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join(timeout=30)

    def output(self, limit: int = 3000) -> str:
        with self.lock:
            members = list(self.members)
        return "\n".join(m.process.output(limit=limit) for m in members)


def _healthy(process: ServerProcess, url: str, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.running:
        try:
            if httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    return False


# --- drivers -------------------------------------------------------------------------------------


@dataclass
class Driver:
    """Runs approval cycles one after the other until ``stop`` is set (it finishes the cycle it is in)."""

    index: int
    fleet: Fleet
    agent_id: str
    owner_token: str
    approver_token: str
    rng: random.Random
    stop: threading.Event
    give_up_at: float
    conversations: list[str] = field(default_factory=list)
    cycles_done: int = 0
    accepted_at: list[float] = field(default_factory=list)  # each start, say or decision answered 2xx
    failed_requests: int = 0
    inline_decisions: int = 0
    queued_decisions: int = 0
    says: int = 0
    error: str | None = None
    thread: threading.Thread | None = None
    started_at: float = field(default_factory=time.monotonic)

    def run(self) -> None:
        try:
            with httpx.Client(timeout=30.0) as http:
                self.http = http
                while not self.stop.is_set():
                    self.cycle()
        except Exception as error:  # reported by the test, with the fleet's logs
            self.error = f"{type(error).__name__}: {error}"

    def _request(self, method: str, path: str, token: str, **kwargs: Any) -> httpx.Response | None:
        urls = self.fleet.web_urls()
        if not urls:
            time.sleep(0.1)
            return None
        try:
            response = self.http.request(
                method, self.rng.choice(urls) + path, headers={"Authorization": f"Token {token}"}, **kwargs
            )
        except httpx.TransportError:
            self.failed_requests += 1
            time.sleep(0.1)
            return None
        if response.status_code >= 500:
            self.failed_requests += 1
            time.sleep(0.1)
            return None
        return response

    def _accepted(self) -> None:
        self.accepted_at.append(time.monotonic())

    def _check_time(self, doing: str) -> None:
        """Fail the driver once its conversation has taken no request for ``STALLED_SECONDS`` (it is stuck:
        lost, as far as its user can tell), or the run is past its deadline."""
        now = time.monotonic()
        since = self.accepted_at[-1] if self.accepted_at else self.started_at
        if now - since > STALLED_SECONDS:
            raise TimeoutError(f"driver {self.index}: nothing accepted for {now - since:.0f} s ({doing})")
        if now > self.give_up_at:
            raise TimeoutError(f"driver {self.index}: a cycle did not finish in time ({doing})")

    def cycle(self) -> None:
        conversation_id = None
        while conversation_id is None:
            self._check_time("starting a conversation")
            started = self._request("POST", f"/agents/{self.agent_id}/start", self.owner_token)
            if started is not None and started.status_code == 201:
                conversation_id = started.json()["conversationId"]
                self._accepted()
        self.conversations.append(conversation_id)
        token, state = None, "started"
        while True:
            self._check_time(f"conversation {conversation_id} {state}")
            read = self._request("GET", f"/agents/{conversation_id}", self.owner_token)
            if read is None:
                continue
            snapshot = read.json()
            state = snapshot["state"]
            if state == "IN_PROGRESS":
                time.sleep(0.2)
            elif state == "AWAITING_HUMAN":
                self.decide(conversation_id)
            elif token is not None and _done(snapshot, token):
                self.cycles_done += 1
                return
            else:  # READY, EXECUTION_INTERRUPTED or ERROR: (say it again, with a new token)
                token = uuid.UUID(int=self.rng.getrandbits(128)).hex
                self.says += 1
                said = self._request(
                    "POST",
                    f"/agents/{conversation_id}",
                    self.owner_token,
                    json={"input": SAY.format(token=token), "context": {"token": token}},
                )
                if said is not None and said.status_code == 200:
                    self._accepted()

    def decide(self, conversation_id: str) -> None:
        inline = self.rng.random() < 0.5
        query = "?wait=10" if inline else ""
        decided = self._request(
            "POST",
            f"/agents/{conversation_id}/resume{query}",
            self.approver_token,
            json={"verdict": "APPROVED", "note": "crash harness"},
        )
        if decided is not None and decided.status_code == 200:
            self._accepted()
            if inline:
                self.inline_decisions += 1
            else:
                self.queued_decisions += 1
        elif decided is not None and decided.status_code != 409:
            raise AssertionError(f"resume answered {decided.status_code}: {decided.text}")


def _done(snapshot: dict[str, Any], token: str) -> bool:
    steps = snapshot.get("steps") or []
    if not steps or token not in (steps[-1].get("input") or ""):
        return False
    return snapshot["state"] == "READY" and any(line.startswith("Done: ") for line in steps[-1]["output"])


# --- the killer ----------------------------------------------------------------------------------


@dataclass
class Kill:
    kind: str
    aimed: bool  # at a process with a request in flight to the recorder
    at: float
    path: str = ""


@dataclass
class Killer:
    fleet: Fleet
    recorder: Recorder
    drivers: list[Driver]
    rng: random.Random
    kills: int
    pause_between: tuple[float, float] = (0.5, 2.0)
    done: list[Kill] = field(default_factory=list)
    error: str | None = None
    _bag: list[str] = field(default_factory=list)
    _aimed_bag: list[str] = field(default_factory=list)
    restarts: list[threading.Thread] = field(default_factory=list)

    def run(self) -> None:
        try:
            for _ in range(self.kills):
                self.wait_until_usable()
                time.sleep(self.rng.uniform(*self.pause_between))
                kill = self.aimed_kill() if self.rng.random() < 0.5 else None
                if kill is None:
                    kill = self.random_kill()
                self.done.append(kill)
        except Exception as error:
            self.error = f"{type(error).__name__}: {error}"
        for restart in self.restarts:
            restart.join(timeout=90)

    def wait_until_usable(self) -> None:
        """Until every driver's conversation took a request after the last kill (so each kill's time to
        usable is its own, not the sum of several), or ``STALLED_SECONDS`` passed."""
        if not self.done:
            return
        last = self.done[-1].at
        while time.monotonic() - last < STALLED_SECONDS:
            if all(
                driver.error or (driver.accepted_at and driver.accepted_at[-1] > last)
                for driver in self.drivers
            ):
                return
            time.sleep(0.05)

    def aimed_kill(self, wait: float = 5.0) -> Kill | None:
        """Kill the group that sends a request in flight to the recorder: a web process (a continuation
        run inline, ``?wait``) and a default q-cluster (a queued one) in turn; None if none came."""
        if not self._aimed_bag:
            self._aimed_bag = ["web", "worker"]
            self.rng.shuffle(self._aimed_bag)
        kind = self._aimed_bag.pop()
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with self.recorder.lock:
                flying = list(self.recorder.in_flight.items())
            for client_port, path in flying:
                member = self.fleet.holder_of(client_port, self.recorder.port)
                if member is not None and member.kind == kind:
                    return self._kill(member, aimed=True, path=path)
            time.sleep(0.02)
        return None

    def random_kill(self) -> Kill:
        """A member of a kind drawn from a shuffled bag of every kind (so each kind is hit in turn)."""
        if not self._bag:
            self._bag = ["timers", "web", "worker"]
            self.rng.shuffle(self._bag)
        kind = self._bag.pop()
        members = [m for m in self.fleet.live() if m.kind == kind]
        while not members:  # its last one is still starting (a web until /healthz answers)
            time.sleep(0.1)
            members = [m for m in self.fleet.live() if m.kind == kind]
        member = self.rng.choice(members)
        return self._kill(member, aimed=False)

    def _kill(self, member: Member, *, aimed: bool, path: str = "") -> Kill:
        self.fleet.kill(member)
        kill = Kill(member.kind, aimed, time.monotonic(), path)
        restart = threading.Thread(target=self._restart, args=(member,), daemon=True)
        restart.start()  # a web joins the fleet once /healthz answers; meanwhile the next kill may come
        self.restarts.append(restart)
        return kill

    def _restart(self, member: Member) -> None:
        try:
            self.fleet.spawn(member.kind, member.slot)
        except Exception as error:
            self.error = f"restarting {member.kind}: {type(error).__name__}: {error}"


# --- a run ---------------------------------------------------------------------------------------


@dataclass
class CrashRun:
    fleet: Fleet
    recorder: Recorder
    drivers: list[Driver]
    killer: Killer
    elapsed: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # seconds of warm-up, kills, last cycles

    def times_to_usable(self) -> list[float]:
        """For each kill, the longest any driver waited from the kill to its next accepted request (a
        start, say or decision answered 2xx): how long until its conversation took a turn again."""
        worst = []
        for kill in self.killer.done:
            waits = []
            for driver in self.drivers:
                later = [at for at in driver.accepted_at if at > kill.at]
                if later:
                    waits.append(later[0] - kill.at)
            worst.append(max(waits) if waits else float("inf"))
        return worst


def run_crash_kills(
    *,
    fleet: Fleet,
    recorder: Recorder,
    agent_id: str,
    owner_token: str,
    approver_token: str,
    seed: int,
    kills: int,
    drivers: int,
    finish_within: float = 120.0,
) -> CrashRun:
    """Drive cycles while ``kills`` SIGKILLs land; then let every driver finish its cycle."""
    started = time.monotonic()
    stop = threading.Event()
    give_up_at = started + finish_within + 30.0 * kills
    crew = [
        Driver(
            i, fleet, agent_id, owner_token, approver_token, random.Random(seed * 1000 + i), stop, give_up_at
        )
        for i in range(drivers)
    ]
    for driver in crew:
        driver.thread = threading.Thread(target=driver.run, daemon=True)
        driver.thread.start()
    warm_until = time.monotonic() + 60
    while any(d.cycles_done == 0 and d.error is None for d in crew) and time.monotonic() < warm_until:
        time.sleep(0.1)  # every driver finished a cycle: the fleet works before the first kill
    killer = Killer(fleet, recorder, crew, random.Random(seed), kills)
    phases = {"warm-up": time.monotonic() - started}
    killer.run()
    phases["kills"] = time.monotonic() - started - phases["warm-up"]
    stop.set()
    for driver in crew:
        assert driver.thread is not None
        driver.thread.join(timeout=max(1.0, give_up_at - time.monotonic()))
    elapsed = time.monotonic() - started
    phases["last cycles"] = elapsed - phases["kills"] - phases["warm-up"]
    return CrashRun(fleet, recorder, crew, killer, elapsed, phases)
