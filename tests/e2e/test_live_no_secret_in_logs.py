"""No secret in any log line of the real processes: uvicorn and a q-cluster at LOG_LEVEL=DEBUG.

A canary secret in path, query, header and body of a rule call (sent by the web process) and of a gated
tool call (sent by the q-cluster after approval) must reach the target and appear in neither log.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harnesses.agents import payments_agent
from harnesses.factories import account_bot
from harnesses.live_stack import LiveStack, api_user, eventually, running_stack
from tests.conftest import CANARY_SECRET_NAME

pytestmark = pytest.mark.django_db(transaction=True)

VAULT = "${vault:" + CANARY_SECRET_NAME + "}"


def everywhere(path: str) -> dict:
    return {
        "method": "POST",
        "path": f"{path}/{VAULT}?k={VAULT}",
        "queryParams": {"q": VAULT},
        "headers": {"X-Api-Key": VAULT, "X-Plain": "id " + VAULT},
        "body": {"key": VAULT, "text": "value " + VAULT},
    }


@pytest.fixture(scope="module")
def debug_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveStack]:
    yield from running_stack(django_db_blocker, tmp_path_factory.mktemp("debug-stack"), LOG_LEVEL="DEBUG")


def deploy(admin, document: dict) -> str:
    created = admin.post("/agentstore/agents", json=document)
    assert created.status_code == 201, created.text
    agent_id = created.json()["id"]
    assert admin.post(f"/administration/production/deploy/{agent_id}").status_code == 200
    return agent_id


def test_no_secret_in_any_log_line_of_the_web_and_qcluster_processes(
    debug_stack, http_recorder, canary_secret
):
    admin = debug_stack.client(api_user("admin", "admin"))
    alice = debug_stack.client(api_user("alice"))
    approver = debug_stack.client(api_user("approver", "approver"))

    rule_agent = account_bot(hitlConfig={})
    rule_agent["workflows"][0]["tasks"][1]["rules"][1]["actions"] = ["say_hello", "ping"]
    rule_agent["workflows"][0]["tasks"].insert(
        2,
        {
            "id": "ping",
            "type": "httpcalls",
            "targetServerUrl": http_recorder.url,
            "calls": [{"name": "ping", "actions": ["ping"], "request": everywhere("/ping")}],
        },
    )
    conversation = alice.post(f"/agents/{deploy(admin, rule_agent)}/start").json()["conversationId"]
    assert alice.post(f"/agents/{conversation}", json={"input": "hello"}).status_code == 200

    tool_agent = payments_agent(http_recorder.url)
    tool_agent["workflows"][0]["tasks"][1]["calls"][0]["request"] = everywhere("/transfers")
    conversation = alice.post(f"/agents/{deploy(admin, tool_agent)}/start").json()["conversationId"]
    assert alice.post(f"/agents/{conversation}", json={"input": "please transfer"}).json()["state"] == (
        "AWAITING_HUMAN"
    )
    assert approver.post(f"/agents/{conversation}/resume", json={"verdict": "APPROVED"}).status_code == 200
    eventually(
        lambda: any(r["path"].startswith("/transfers") for r in http_recorder.requests),
        timeout=30,
        what="the approved transfer to be sent by the q-cluster",
    )

    sent = [r for r in http_recorder.requests if canary_secret in r["path"] and canary_secret in r["query"]]
    assert len(sent) == 2  # both calls really carried the secret
    for process in (debug_stack.server, debug_stack.qcluster, debug_stack.timer_cluster):
        log = process.stderr_path.read_text(errors="replace") + process.stdout_path.read_text(
            errors="replace"
        )
        assert log.strip(), f"{process.name} logged nothing at DEBUG: the check would prove nothing"
        assert canary_secret not in log, f"the canary secret is in the {process.name} log"
    for client in (admin, alice, approver):
        client.close()
