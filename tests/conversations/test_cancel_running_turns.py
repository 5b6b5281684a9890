"""Approve and cancel tell the truth: a cancel of a running turn is cooperative and visible.

Real threads against PostgreSQL and a slow HTTP target on loopback: the cancel lands while the first
http call after the approval is in flight; the turn stops before its next task, so the second call
never reaches the server, and both the approver and the canceller are told what happened.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import time_machine
from django.db import connections

from approvals.continuation_runs import claim_continuation
from approvals.models import AuditEntry, Pause, PauseStatus
from approvals.recovery import run_recovery
from conversations.models import Conversation, ConversationStep
from harnesses.agents import AFTER_TOOLS, payments_agent
from harnesses.factories import deployed_agent, start
from harnesses.queue_drain import queued_count, run_queued_tasks

pytestmark = pytest.mark.django_db(transaction=True)

IN_FLIGHT_SECONDS = 1.5


def shipping_agent(target_url: str, *, pause: bool = True) -> dict[str, Any]:
    """'ship' (after an approval, with ``pause``) calls POST /first, then, in the next task, POST /second."""

    def call(name: str) -> dict[str, Any]:
        return {
            "id": name,
            "type": "httpcalls",
            "targetServerUrl": target_url,
            "calls": [{"name": name, "actions": ["ship"], "request": {"method": "POST", "path": f"/{name}"}}],
        }

    return {
        "name": "shipping-bot",
        "workflows": [
            {
                "id": "main",
                "tasks": [
                    {
                        "id": "parse",
                        "type": "parser",
                        "dictionaries": [{"word": "ship", "expressions": "ship(order)"}],
                    },
                    {
                        "id": "rules",
                        "type": "behavior_rules",
                        "rules": [
                            {
                                "name": "Ship",
                                "actions": ["PAUSE_CONVERSATION", "ship"] if pause else ["ship"],
                                "conditions": [
                                    {"type": "inputmatcher", "configs": {"expressions": "ship(*)"}}
                                ],
                            }
                        ],
                    },
                    call("first"),
                    call("second"),
                    {
                        "id": "output",
                        "type": "output",
                        "outputs": [{"action": "ship", "texts": ["Shipped."]}],
                    },
                ],
            }
        ],
    }


def in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = work()
        except BaseException as exc:  # re-raised by the test through the box
            box["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def joined(thread: threading.Thread, box: dict[str, Any]) -> Any:
    thread.join(30)
    assert not thread.is_alive()
    if "error" in box:
        raise box["error"]
    return box.get("result")


def wait_until(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def paths(server) -> list[str]:
    return [request.path for request in server.received]


def worker() -> int:
    """A q-cluster worker picking up the continuation once the decision committed."""
    wait_until(lambda: queued_count() > 0)
    return run_queued_tasks()


def paused_shipping(client, server) -> str:
    server.respond("/first", json_body={"ok": True}, delay_seconds=IN_FLIGHT_SECONDS)
    conversation_id = start(client, deployed_agent(shipping_agent(server.url)))
    response = client.post(f"/agents/{conversation_id}", {"input": "ship it"}, format="json")
    assert response.json()["state"] == "AWAITING_HUMAN", response.content
    return conversation_id


def cancel_while_first_call_in_flight(client, server, conversation_id: str, verb: str = "cancel") -> Any:
    wait_until(lambda: "/first" in paths(server))
    return client.post(f"/agents/{conversation_id}/{verb}")


def latest_step(conversation_id: str) -> ConversationStep:
    return ConversationStep.objects.filter(conversation_id=conversation_id).order_by("-index").first()


def test_cancel_during_running_continuation_stops_before_next_task(
    alice_client, approver_client, loopback_server
):
    conversation_id = paused_shipping(alice_client, loopback_server)
    assert (
        approver_client.post(
            f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json"
        ).status_code
        == 200
    )
    running = in_thread(worker)

    cancelled = cancel_while_first_call_in_flight(alice_client, loopback_server, conversation_id)

    # the canceller is told the truth: accepted, the turn is still running and will stop
    assert cancelled.status_code == 202, cancelled.content
    body = cancelled.json()
    assert body["state"] == "IN_PROGRESS" and body["cancelRequested"]["by"] == "alice"
    assert body["cancelRequested"]["at"]
    # while it stops, nobody can talk to it
    assert alice_client.post(f"/agents/{conversation_id}", {"input": "hi"}, format="json").status_code == 409
    assert joined(*running) == 1
    assert paths(loopback_server) == ["/first"]  # the second, later call never fired
    assert Conversation.objects.get(pk=conversation_id).state == "EXECUTION_INTERRUPTED"
    assert Pause.objects.get(subject_id=conversation_id).status == PauseStatus.RESOLVED
    step = latest_step(conversation_id)
    assert step.data["hitl:cancelled"]["by"] == "alice"
    assert step.data["hitl:cancelled"]["stoppedBefore"] == {"workflowId": "main", "taskIndex": 3}
    assert [sent["call"] for sent in step.data["httpcalls:requests"]] == ["first"]  # what did run is kept
    assert "Shipped." not in step.output
    # the conversation takes input again
    assert (
        alice_client.post(f"/agents/{conversation_id}", {"input": "hi"}, format="json").json()["state"]
        == "READY"
    )


@pytest.mark.parametrize("inline", [True, False], ids=["continued-by-the-approver", "q-cluster-only"])
def test_cancel_during_continuation_is_visible_to_approver(
    alice_client, approver_client, loopback_server, settings, inline
):
    settings.HITL_CONTINUE_INLINE = inline
    conversation_id = paused_shipping(alice_client, loopback_server)
    approving = in_thread(
        lambda: approver_client.post(
            f"/agents/{conversation_id}/resume?wait=30", {"verdict": "APPROVED"}, format="json"
        )
    )
    running = None if inline else in_thread(worker)

    assert (
        cancel_while_first_call_in_flight(alice_client, loopback_server, conversation_id).status_code == 202
    )

    answer = joined(*approving)
    if running is not None:
        joined(*running)
    assert answer.status_code == 200, answer.content
    waited = answer.json()
    assert waited["state"] == "EXECUTION_INTERRUPTED"
    last = waited["lastDecision"]
    assert (last["verdict"], last["decidedBy"], last["cancelledBy"]) == ("APPROVED", "approver", "alice")
    assert last["cancelledAt"] >= last["decidedAt"]
    status = approver_client.get(f"/agents/{conversation_id}/approval-status").json()
    assert status["state"] == "EXECUTION_INTERRUPTED" and status["lastDecision"] == last
    assert paths(loopback_server) == ["/first"]


def test_cancel_and_approval_both_audited_in_order(alice_client, approver_client, loopback_server):
    conversation_id = paused_shipping(alice_client, loopback_server)
    assert (
        approver_client.post(
            f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json"
        ).status_code
        == 200
    )
    running = in_thread(worker)
    assert (
        cancel_while_first_call_in_flight(alice_client, loopback_server, conversation_id).status_code == 202
    )
    joined(*running)

    pause = Pause.objects.get(subject_id=conversation_id)
    entries = list(AuditEntry.objects.filter(subject_id=conversation_id).order_by("sequence"))
    assert [(e.verb, e.actor, e.verdict) for e in entries] == [
        ("hitl.pause", "system:pipeline", ""),
        ("hitl.approval", "approver", "APPROVED"),
        ("hitl.turn.interrupted", "alice", ""),
        ("hitl.continuation.cancelled", "system:continuation", ""),
    ]
    assert all(e.pause_id == pause.id and e.epoch == pause.epoch for e in entries[1:])
    assert entries[2].detail == {"mode": "CANCEL_GRACEFUL", "running": True}
    assert entries[3].detail == {
        "cancelledBy": "alice",
        "started": True,
        "stoppedBefore": {"workflowId": "main", "taskIndex": 3},
    }
    assert entries[1].created_at < entries[2].created_at < entries[3].created_at


def test_end_during_running_continuation_stops_it_and_ends_the_conversation(
    alice_client, approver_client, loopback_server
):
    conversation_id = paused_shipping(alice_client, loopback_server)
    approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    running = in_thread(worker)

    ended = cancel_while_first_call_in_flight(
        alice_client, loopback_server, conversation_id, "endConversation"
    )

    assert ended.status_code == 200
    assert ended.json()["state"] == "ENDED" and ended.json()["cancelRequested"]["by"] == "alice"
    joined(*running)
    assert paths(loopback_server) == ["/first"]
    assert Conversation.objects.get(pk=conversation_id).state == "ENDED"
    last = approver_client.get(f"/agents/{conversation_id}/approval-status").json()["lastDecision"]
    assert (last["verdict"], last["cancelledBy"]) == ("APPROVED", "alice")
    interrupted = AuditEntry.objects.get(subject_id=conversation_id, verb="hitl.turn.interrupted")
    assert interrupted.actor == "alice" and interrupted.detail["mode"] == "END_CONVERSATION"


def test_cancel_of_a_running_turn_stops_it_before_its_next_task(alice_client, loopback_server):
    loopback_server.respond("/first", json_body={"ok": True}, delay_seconds=IN_FLIGHT_SECONDS)
    conversation_id = start(alice_client, deployed_agent(shipping_agent(loopback_server.url, pause=False)))
    saying = in_thread(
        lambda: alice_client.post(f"/agents/{conversation_id}", {"input": "ship it"}, format="json")
    )

    cancelled = cancel_while_first_call_in_flight(alice_client, loopback_server, conversation_id)

    assert cancelled.status_code == 202 and cancelled.json()["cancelRequested"]["by"] == "alice"
    said = joined(*saying)
    assert said.status_code == 200 and said.json()["state"] == "EXECUTION_INTERRUPTED"
    assert paths(loopback_server) == ["/first"]
    assert latest_step(conversation_id).data["hitl:cancelled"]["by"] == "alice"
    assert AuditEntry.objects.get(subject_id=conversation_id, verb="hitl.turn.interrupted").actor == "alice"


def test_a_second_cancel_of_a_stopping_turn_names_the_first_canceller(
    alice_client, approver_client, loopback_server
):
    conversation_id = paused_shipping(alice_client, loopback_server)
    approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    running = in_thread(worker)
    assert (
        cancel_while_first_call_in_flight(alice_client, loopback_server, conversation_id).status_code == 202
    )

    again = approver_client.post(f"/agents/{conversation_id}/cancel")

    assert again.status_code == 202 and again.json()["cancelRequested"]["by"] == "alice"
    joined(*running)
    assert AuditEntry.objects.filter(subject_id=conversation_id, verb="hitl.turn.interrupted").count() == 1


def test_cancel_stops_the_tool_loop_before_its_next_approved_tool(
    alice_client, approver_client, loopback_server
):
    loopback_server.respond("/transfers", json_body={"ok": True}, delay_seconds=IN_FLIGHT_SECONDS)
    script = [
        AFTER_TOOLS,
        {
            "when": {"inputContains": "transfer"},
            "toolCalls": [
                {"id": "call-1", "name": "transfer_funds", "arguments": {"amount": 100, "to": "bob"}},
                {"id": "call-2", "name": "transfer_funds", "arguments": {"amount": 200, "to": "carol"}},
            ],
        },
    ]
    conversation_id = start(alice_client, deployed_agent(payments_agent(loopback_server.url, script=script)))
    said = alice_client.post(f"/agents/{conversation_id}", {"input": "transfer twice"}, format="json")
    assert said.json()["state"] == "AWAITING_HUMAN", said.content
    approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    running = in_thread(worker)

    wait_until(lambda: "/transfers" in paths(loopback_server))
    assert alice_client.post(f"/agents/{conversation_id}/cancel").status_code == 202

    joined(*running)
    transfers = [r for r in loopback_server.received if r.path == "/transfers"]
    assert [r.json()["to"] for r in transfers] == ["bob"]  # the second approved call never ran
    assert Conversation.objects.get(pk=conversation_id).state == "EXECUTION_INTERRUPTED"
    assert Pause.objects.get(subject_id=conversation_id).cancel_requested_by == "alice"


def test_a_dead_continuation_with_a_cancel_request_ends_cancelled_not_pending(
    alice_client, approver_client, loopback_server
):
    conversation_id = paused_shipping(alice_client, loopback_server)
    approver_client.post(f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json")
    pause = Pause.objects.get(subject_id=conversation_id)
    assert claim_continuation(str(pause.id)) is not None  # a worker claimed it, then died
    assert alice_client.post(f"/agents/{conversation_id}/cancel").status_code == 202

    with time_machine.travel(pause.decided_at.timestamp() + 3600, tick=False):
        report = run_recovery()

    assert report["restoredContinuations"] == 0
    pause.refresh_from_db()
    assert pause.status == PauseStatus.RESOLVED and pause.cancel_requested_by == "alice"
    assert Conversation.objects.get(pk=conversation_id).state == "EXECUTION_INTERRUPTED"
    assert AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.continuation.cancelled").count() == 1
    assert not AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.restored").exists()
    assert paths(loopback_server) == []


def test_cancel_stops_a_call_before_its_next_retry(alice_client, loopback_server):
    """A retrying call is a loop of requests: a cancel that lands during one attempt stops the next."""
    loopback_server.respond("/first", status=503, json_body={"busy": True}, delay_seconds=IN_FLIGHT_SECONDS)
    document = shipping_agent(loopback_server.url, pause=False)
    first = document["workflows"][0]["tasks"][2]["calls"][0]
    first["postResponse"] = {
        "retryApiCallInstruction": {"maxRetries": 3, "exponentialBackoffDelayInMillis": 10}
    }
    conversation_id = start(alice_client, deployed_agent(document))
    saying = in_thread(
        lambda: alice_client.post(f"/agents/{conversation_id}", {"input": "ship it"}, format="json")
    )

    assert (
        cancel_while_first_call_in_flight(alice_client, loopback_server, conversation_id).status_code == 202
    )

    said = joined(*saying)
    assert said.status_code == 200 and said.json()["state"] == "EXECUTION_INTERRUPTED"
    assert paths(loopback_server) == ["/first"]  # no retry, and the next task's call never fired
