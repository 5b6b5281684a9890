"""A live stack for end-to-end tests: uvicorn and real django-q2 q-clusters on the pytest test database.

The stack runs the deployed topology (docs/operations.md): the default q-cluster for continuations and
the timer cluster (``Q_CLUSTER_NAME=hitl-timers``) for timers and recovery. Its processes keep
django-q2's successful task rows (``HITL_Q_SAVE_LIMIT=0``; production keeps none) so tests can see
which task ran and what it returned.

Tests that use ``live_stack`` must be ``@pytest.mark.django_db(transaction=True)``: the server and the
clusters are other processes and see only committed rows. ``people`` holds API clients on the live server by
username.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from harnesses.live_stack import LiveStack, api_user, running_stack


@pytest.fixture(scope="module")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveStack]:
    yield from running_stack(django_db_blocker, tmp_path_factory.mktemp("live-stack"))


ROLES = {"admin": "admin", "approver": "approver"}  # every other name is a plain user


class People(dict[str, httpx.Client]):
    """API clients on the live server by username, each made with its user on first use: ``admin`` and
    ``approver`` have those roles, ``anonymous`` sends no token, any other name is a plain user."""

    def __init__(self, stack: LiveStack) -> None:
        super().__init__()
        self.stack = stack

    def __missing__(self, name: str) -> httpx.Client:
        token = None if name == "anonymous" else api_user(name, ROLES.get(name, "user"))
        client = self[name] = self.stack.client(token)
        return client


@pytest.fixture
def people(live_stack: LiveStack) -> Iterator[People]:
    clients = People(live_stack)
    yield clients
    for client in clients.values():
        client.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(autouse=True)
def _server_logs_on_failure(request) -> Iterator[None]:
    """When a test fails, show what uvicorn and the q-clusters wrote (pytest prints captured output)."""
    yield
    report = getattr(request.node, "report_call", None)
    stack = request.node.funcargs.get("live_stack")
    if report is not None and report.failed and isinstance(stack, LiveStack):
        for process in (stack.server, stack.qcluster, stack.timer_cluster):
            if process is not None:
                print(process.output(limit=4000))
