"""The Python client (clients/python, ``hitl_client``) against a live uvicorn: an agent's gated HTTP call
is sent only once a reviewer approved it, exactly as approved (a reviewer's edit applied, the secret
header as the agent holds it), at most once across retried runs; a gated function runs with the
approved arguments once; refusals arrive as typed errors carrying the service's code."""

from __future__ import annotations

import asyncio
import datetime
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hitl_client import (
    AlreadyClaimed,
    AsyncHitlClient,
    BadRequest,
    Forbidden,
    HitlClient,
    OutcomeUnknown,
    Rejected,
    WaitTimeout,
)
from hitl_client.webhooks import WebhookReceiver
from standardwebhooks import Webhook

from harnesses.echo_target import EchoTarget, running_echo_target
from harnesses.live_stack import LiveStack, api_user, eventually, running_stack

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "Bearer sk-live-abcdef123456"


@pytest.fixture(scope="module")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[LiveStack]:
    yield from running_stack(django_db_blocker, tmp_path_factory.mktemp("python-client"), qclusters=False)


@pytest.fixture(scope="module")
def target() -> Iterator[EchoTarget]:
    with running_echo_target() as running:
        yield running


@pytest.fixture
def agent(live_stack: LiveStack, request: pytest.FixtureRequest) -> Iterator[HitlClient]:
    token = api_user(f"bot-{request.node.name[:40]}", "agent")
    with HitlClient(live_stack.base_url, token, agent="refund-bot") as client:
        yield client


@pytest.fixture
def approver(live_stack: LiveStack) -> Iterator[httpx.Client]:
    client = live_stack.client(api_user("approver", "approver"))
    yield client
    for thread in threading.enumerate():  # a reviewer still reading its answer keeps the client open
        if thread.name == REVIEWER:
            thread.join(25)
    client.close()


def refund(target: EchoTarget, amount: int = 250) -> httpx.Request:
    return httpx.Request(
        "POST",
        f"{target.url}/refunds",
        json={"orderId": "A-1", "amount": amount},
        headers={"Authorization": SECRET},
    )


REVIEWER = "reviewer"


def reviewer(approver: httpx.Client, decision: dict[str, Any], *, action: str = "refund") -> threading.Thread:
    """A reviewer who decides the next pending request of ``action`` as soon as it appears."""

    def decide() -> None:
        def pending() -> list[dict[str, Any]]:
            answer = approver.get("/approval-requests", params={"status": "PENDING"})
            if answer.status_code != 200:  # a test's database flushed under a reviewer still looking
                return []
            return [item for item in answer.json()["approvalRequests"] if item["action"]["name"] == action]

        found = eventually(pending, timeout=20)
        approver.post(f"/approval-requests/{found[0]['id']}/decision", json=decision).raise_for_status()

    thread = threading.Thread(target=decide, name=REVIEWER, daemon=True)
    thread.start()
    return thread


def test_execute_sends_the_approved_request_once_with_its_secret(agent, approver, target):
    before = len(target.requests_to("/refunds"))
    thread = reviewer(approver, {"verdict": "APPROVED"})
    response = agent.execute(
        refund(target), run_id="run-1", call_id="call-1", action="refund", reason="Refund", timeout=30
    )
    thread.join(5)
    assert response.status_code == 200
    sent = target.requests_to("/refunds")[before:]
    assert len(sent) == 1
    assert sent[0].header("Authorization") == SECRET
    assert b'"amount":250' in sent[0].body
    filed = approver.get("/approval-requests", params={"status": "APPROVED"}).json()["approvalRequests"][0]
    assert filed["requestPreview"]["headers"]["authorization"] != SECRET
    assert filed["claim"]["outcome"]["status"] == "succeeded"


def test_execute_sends_the_reviewers_edit(agent, approver, target):
    before = len(target.requests_to("/refunds"))
    edited = '{"orderId":"A-1","amount":100}'
    thread = reviewer(approver, {"verdict": "APPROVED", "amendedRequest": {"body": edited}})
    agent.execute(
        refund(target), run_id="run-2", call_id="call-1", action="refund", reason="Refund", timeout=30
    )
    thread.join(5)
    sent = target.requests_to("/refunds")[before:]
    assert [received.body.decode() for received in sent] == [edited]
    assert sent[0].header("Authorization") == SECRET


def test_a_rejection_with_guidance_raises_and_sends_nothing(agent, approver, target):
    before = len(target.requests_to("/refunds"))
    reviewer(approver, {"verdict": "REJECTED", "note": "Refund 100 and open a ticket", "guidance": True})
    with pytest.raises(Rejected) as refused:
        agent.execute(
            refund(target), run_id="run-3", call_id="call-1", action="refund", reason="Refund", timeout=30
        )
    assert refused.value.guidance == "Refund 100 and open a ticket"
    assert len(target.requests_to("/refunds")) == before


def test_a_retried_run_never_sends_twice(agent, approver, target, live_stack):
    reviewer(approver, {"verdict": "APPROVED"})
    agent.execute(
        refund(target), run_id="run-4", call_id="call-1", action="refund", reason="Refund", timeout=30
    )
    sent = len(target.requests_to("/refunds"))
    with pytest.raises(AlreadyClaimed) as again:
        agent.execute(
            refund(target), run_id="run-4", call_id="call-1", action="refund", reason="Refund", timeout=30
        )
    assert again.value.code == "ALREADY_CLAIMED" and again.value.outcome["status"] == "succeeded"
    assert len(target.requests_to("/refunds")) == sent


def test_a_run_that_died_after_claiming_gets_outcome_unknown_and_sends_nothing(agent, approver, target):
    reviewer(approver, {"verdict": "APPROVED"})
    request = refund(target)
    filed = agent.request_approval(
        run_id="run-5", call_id="c", action="refund", reason="Refund", request=request
    )
    approved = agent.wait(filed.id, timeout=30)
    agent.claim(approved.id, request=refund(target))  # ... and the process dies before sending or reporting
    sent = len(target.requests_to("/refunds"))
    with pytest.raises(OutcomeUnknown):
        agent.execute(
            refund(target), run_id="run-5", call_id="c", action="refund", reason="Refund", timeout=30
        )
    assert len(target.requests_to("/refunds")) == sent


def test_require_approval_runs_the_function_once_with_the_approved_arguments(agent, approver):
    calls: list[dict[str, Any]] = []

    @agent.require_approval(reason="Deleting an account", run_id="run-6", timeout=30)
    def delete_account(user: str, hard: bool = False) -> str:
        calls.append({"user": user, "hard": hard})
        return "deleted"

    reviewer(
        approver,
        {"verdict": "APPROVED", "amendedArguments": {"user": "bob", "hard": False}},
        action="delete_account",
    )
    assert delete_account("bob", hard=True) == "deleted"
    assert calls == [{"user": "bob", "hard": False}]
    with pytest.raises(AlreadyClaimed):
        delete_account("bob", hard=True)
    assert len(calls) == 1


def test_the_async_client_executes_the_approved_request(live_stack, approver, target):
    token = api_user("async-bot", "agent")
    before = len(target.requests_to("/refunds"))
    reviewer(approver, {"verdict": "APPROVED"})

    async def run() -> int:
        async with AsyncHitlClient(live_stack.base_url, token, agent="refund-bot") as client:
            response = await client.execute(
                refund(target, 42), run_id="run-7", call_id="c", action="refund", reason="Refund", timeout=30
            )
            return response.status_code

    assert asyncio.run(run()) == 200
    assert [b'"amount":42' in received.body for received in target.requests_to("/refunds")[before:]] == [True]


def test_refusals_are_typed_errors_with_the_services_code(agent, live_stack):
    person = HitlClient(live_stack.base_url, api_user("carol"))
    with pytest.raises(Forbidden) as forbidden:
        person.request_approval(run_id="r", call_id="c", action="refund", reason="Refund")
    assert forbidden.value.code == "FORBIDDEN" and forbidden.value.status == 403
    with pytest.raises(BadRequest) as bad:
        agent.request_approval(run_id="r", call_id="c", action="refund", reason=" ")
    assert [error["field"] for error in bad.value.problem["errors"]] == ["reason"]
    filed = agent.request_approval(run_id="r", call_id="c2", action="refund", reason="Refund")
    with pytest.raises(WaitTimeout):
        agent.wait(filed.id, timeout=0.5)
    assert agent.cancel(filed.id).status == "CANCELLED"
    person.close()


def test_watch_streams_the_status_until_it_ends(agent, approver):
    filed = agent.request_approval(run_id="run-8", call_id="c", action="watched", reason="Watch it")
    reviewer(approver, {"verdict": "APPROVED"}, action="watched")
    assert list(agent.watch(filed.id)) == ["PENDING", "APPROVED"]


def test_the_webhook_receiver_verifies_and_drops_duplicates():
    secret = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = '{"type":"approval_request.decided","data":{"id":"x","status":"APPROVED"}}'
    now = datetime.datetime.now(tz=datetime.UTC)
    headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign("msg_1", now, body),
    }
    receiver = WebhookReceiver(secret, seen=set())
    assert receiver.receive(body, headers)["data"]["status"] == "APPROVED"
    assert receiver.receive(body, headers) is None
    with pytest.raises(Exception, match="(?i)signature"):
        WebhookReceiver(secret).receive(body.replace("APPROVED", "REJECTED"), headers)
