"""Each framework adapter with the agent as a process of its own (harnesses/framework_agent.py: LangGraph
with its PostgreSQL checkpointer, the OpenAI Agents SDK with its serialized RunState, Pydantic AI with its
message history), against a live uvicorn and a loopback recorder:

- a run resumed in a new process: the first process filed the approval request and was killed while it
  waited; the next one finds the same request by its idempotency key (nothing filed twice), waits for
  the reviewer, runs the approved tool once and reports the outcome;
- a crash between claim and outcome: the process is SIGKILLed once its approval is claimed, before the
  tool's request (``claimed``) or after it reached the target (``executed``), never having reported
  what happened. The restarted process is refused ``OUTCOME_UNKNOWN`` and runs nothing: the recorder
  sees the approved request at most once, and the approval was claimed once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.db import connection
from psycopg import sql

from approval_requests.models import ApprovalRequest
from approvals.models import AuditEntry
from harnesses.claiming_agent import REFUSED_OUTCOME_UNKNOWN
from harnesses.clusters import kill_group
from harnesses.echo_target import EchoTarget, running_echo_target
from harnesses.framework_agent import FRAMEWORKS
from harnesses.live_stack import LiveStack, ServerProcess, api_user, eventually, running_stack

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]
AGENT_SECONDS = 90


@pytest.fixture(scope="module")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveStack]:
    """uvicorn alone: no timer and no callback here."""
    yield from running_stack(django_db_blocker, tmp_path_factory.mktemp("adapter-processes"), qclusters=False)


@pytest.fixture(scope="module")
def checkpoints(django_db_setup, django_db_blocker) -> Iterator[str]:
    """A database of its own for LangGraph's checkpoints, beside the test database: its DSN."""
    with django_db_blocker.unblock():
        settings = connection.settings_dict
    server = {
        "host": settings.get("HOST") or "127.0.0.1",
        "port": str(settings.get("PORT") or 5432),
        "user": settings.get("USER") or "postgres",
        "password": settings.get("PASSWORD") or "",
    }
    name = f"{settings['NAME']}_checkpoints"

    def admin(statement: sql.Composable) -> None:
        with psycopg.connect(dbname="postgres", autocommit=True, **server) as admin_connection:
            admin_connection.execute(statement)

    admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield psycopg.conninfo.make_conninfo(dbname=name, **server)
    admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def target() -> Iterator[EchoTarget]:
    with running_echo_target() as running:
        yield running


@pytest.fixture
def approver(live_stack: LiveStack) -> Iterator[httpx.Client]:
    client = live_stack.client(api_user("approver", "approver"))
    yield client
    client.close()


class Agent:
    """How to start the framework's agent process on one run and one state directory."""

    def __init__(
        self, live_stack: LiveStack, checkpoints: str, target: EchoTarget, framework: str, tmp: Path
    ) -> None:
        self.framework = framework
        self.run_id = f"{framework}-{uuid.uuid4().hex[:8]}"
        self.refunds = f"/{self.run_id}"
        self.state = tmp / "state"
        self.args = [sys.executable, "-m", "harnesses.framework_agent", "--framework", framework]
        self.args += ["--base-url", live_stack.base_url, "--run-id", self.run_id]
        self.args += ["--target-url", f"{target.url}{self.refunds}", "--state-dir", str(self.state)]
        token = api_user(f"{framework}-bot", "agent")
        self.env = {
            **os.environ,
            "HITL_AGENT_TOKEN": token,
            "HITL_CHECKPOINT_DSN": checkpoints,
            "PYTHONUNBUFFERED": "1",
            "PYDANTIC_AI_NO_BANNER": "1",
        }
        self.env.pop("OPENAI_API_KEY", None)
        self.log_dir = tmp

    def start(self, label: str, stop_after: str | None = None) -> ServerProcess:
        args = self.args + (["--stop-after", stop_after] if stop_after else [])
        return ServerProcess.spawn(f"{self.framework}-{label}", args, env=self.env, log_dir=self.log_dir)

    def killed_at(self, process: ServerProcess, step: str) -> None:
        """Wait until ``process`` reached ``step``, then SIGKILL its process group."""
        try:
            eventually(
                lambda: (self.state / step).exists() or not process.running,
                timeout=AGENT_SECONDS,
                what=f"the {self.framework} agent to reach {step}",
            )
            assert process.running, process.output()
            kill_group(process)
        finally:
            process.stop()
        assert process.popen.returncode == -signal.SIGKILL

    def finished(self, process: ServerProcess) -> int:
        try:
            process.popen.wait(timeout=AGENT_SECONDS)
        finally:
            process.stop()
        return process.popen.returncode

    def requests(self, approver: httpx.Client) -> list[dict[str, Any]]:
        """The approval requests filed for this run."""
        found = approver.get("/approval-requests", params={"limit": 1000}).json()["approvalRequests"]
        return [item for item in found if item["idempotencyKey"].startswith(f"{self.run_id}/")]


@pytest.fixture(params=FRAMEWORKS)
def agent(request, live_stack, checkpoints, target, tmp_path) -> Agent:
    return Agent(live_stack, checkpoints, target, request.param, tmp_path)


def approve_when_filed(approver: httpx.Client, agent: Agent) -> threading.Thread:
    """A reviewer who approves the run's request as soon as it is pending."""

    def approve() -> None:
        pending = eventually(
            lambda: [item for item in agent.requests(approver) if item["status"] == "PENDING"],
            timeout=AGENT_SECONDS,
            what=f"the request of {agent.run_id}",
        )
        answer = approver.post(
            f"/approval-requests/{pending[0]['id']}/decision", json={"verdict": "APPROVED"}
        )
        answer.raise_for_status()

    thread = threading.Thread(target=approve, daemon=True)
    thread.start()
    return thread


def test_a_run_resumed_in_a_new_process_files_nothing_twice_and_runs_once(agent, approver, target):
    first = agent.start("first", stop_after="filed")
    agent.killed_at(first, "filed")  # filed, pending, and the process is gone
    [filed] = agent.requests(approver)
    assert filed["status"] == "PENDING"

    reviewer = approve_when_filed(approver, agent)
    second = agent.start("second")
    code = agent.finished(second)
    reviewer.join(timeout=5)
    assert code == 0, second.output()
    [found] = agent.requests(approver)  # the same request: found by its idempotency key, not filed again
    assert found["id"] == filed["id"]
    assert found["claim"]["outcome"]["status"] == "succeeded", found
    assert len(target.requests_to(agent.refunds)) == 1


@pytest.mark.parametrize("step", ["claimed", "executed"])
def test_a_process_killed_between_claim_and_outcome_never_runs_the_tool_again(agent, approver, target, step):
    reviewer = approve_when_filed(approver, agent)
    first = agent.start("first", stop_after=step)
    agent.killed_at(first, step)
    reviewer.join(timeout=5)

    second = agent.start("second")
    code = agent.finished(second)
    assert code == REFUSED_OUTCOME_UNKNOWN, second.output()
    assert not (agent.state / "done").exists()
    executed = target.requests_to(agent.refunds)
    assert len(executed) == (1 if step == "executed" else 0), [each.text() for each in executed]

    [found] = agent.requests(approver)
    request = ApprovalRequest.objects.get(pk=found["id"])
    assert request.claimed_at is not None and request.outcome_status == ""
    claims = AuditEntry.objects.filter(subject_id=found["id"], verb="hitl.request.claimed").count()
    assert claims == 1
