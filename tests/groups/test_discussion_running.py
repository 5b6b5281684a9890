"""A running discussion, seen from other threads: a cancel stops it before its next member turn, and
crash recovery fails a discussion whose process died (its lease ran out)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from approvals.models import AuditEntry
from approvals.recovery import interrupt_stale_turns
from groups.demo_group import demo_member_document
from groups.models import GroupConversation
from harnesses.factories import deployed_agent
from harnesses.members import answering, group
from harnesses.users import client_for

HOLD_SECONDS = 20


@pytest.fixture
def held_server() -> Iterator[SimpleNamespace]:
    """A loopback server whose answers wait until the test releases them."""
    arrived, release = threading.Event(), threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            arrived.set()
            release.wait(HOLD_SECONDS)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield SimpleNamespace(url=f"http://127.0.0.1:{server.server_port}", arrived=arrived, release=release)
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def slow_member(url: str) -> str:
    """A member whose every turn makes an HTTP call the held server answers only when released."""
    document = demo_member_document("slow", "Slow answer.")
    document["workflows"][0]["tasks"].insert(
        1,
        {
            "id": "wait",
            "type": "httpcalls",
            "targetServerUrl": url,
            "calls": [{"name": "wait", "actions": ["answer"], "request": {"method": "get", "path": "/wait"}}],
        },
    )
    return deployed_agent(document)


@pytest.mark.django_db(transaction=True)
def test_cancelling_a_running_discussion_stops_it_before_its_next_member_turn(alice, held_server):
    group_id = group(
        [(slow_member(held_server.url), "Slow"), (answering("quick", "Quick answer."), "Quick")],
        [{"name": "Opinions", "type": "OPINION"}],
    )
    runner, answer = started_in_thread(alice, group_id)
    assert held_server.arrived.wait(HOLD_SECONDS), "the slow member's turn never started"
    discussion = GroupConversation.objects.get()

    cancelled = client_for(alice).post(f"/groups/{group_id}/conversations/{discussion.pk}/cancel")

    assert cancelled.status_code == 200, cancelled.content
    assert cancelled.json()["state"] == "IN_PROGRESS" and cancelled.json()["cancelRequested"] is True
    held_server.release.set()
    runner.join(HOLD_SECONDS)
    assert not runner.is_alive()
    assert answer["status"] == 201 and answer["body"]["state"] == "CANCELLED"
    assert [entry["role"] for entry in answer["body"]["transcript"]] == ["Slow"]  # the quick one never spoke
    verbs = list(AuditEntry.objects.filter(subject_id=discussion.pk).values_list("verb", "actor"))
    assert ("hitl.discussion.cancel_requested", "alice") in verbs
    assert ("hitl.discussion.finished", "alice") in verbs


@pytest.mark.django_db
def test_recovery_fails_a_discussion_whose_process_died(alice_client):
    group_id = group([(answering("p", "Yes."), "Optimist")], [{"name": "Only", "type": "OPINION"}])
    response = alice_client.post(f"/groups/{group_id}/conversations", {"question": "q"}, format="json")
    discussion = GroupConversation.objects.get(pk=response.json()["discussionId"])
    # as a dead process leaves it: IN_PROGRESS, its lease run out, no pause open
    GroupConversation.objects.filter(pk=discussion.pk).update(
        state="IN_PROGRESS", turn_alive_until=timezone.now() - timedelta(seconds=1)
    )
    alive = GroupConversation.objects.create(
        group_id=group_id,
        group_version=1,
        question="q",
        state="IN_PROGRESS",
        turn_alive_until=timezone.now() + timedelta(minutes=1),
    )

    assert interrupt_stale_turns(timezone.now()) == 1

    discussion.refresh_from_db()
    assert discussion.state == "FAILED" and discussion.transcript[-1]["status"] == "ERROR"
    assert "interrupted" in discussion.transcript[-1]["note"]
    assert GroupConversation.objects.get(pk=alive.pk).state == "IN_PROGRESS"
    finished = AuditEntry.objects.filter(subject_id=discussion.pk, verb="hitl.discussion.finished").last()
    assert finished.actor == "system:recovery" and finished.detail["state"] == "FAILED"


def started_in_thread(alice: Any, group_id: str) -> tuple[threading.Thread, dict[str, Any]]:
    """Alice starts a discussion of the group on another thread; its answer lands in the dict."""
    answer: dict[str, Any] = {}

    def run() -> None:
        try:
            response = client_for(alice).post(
                f"/groups/{group_id}/conversations", {"question": "q"}, format="json"
            )
            answer["status"], answer["body"] = response.status_code, response.json()
        finally:
            connection.close()

    runner = threading.Thread(target=run)
    runner.start()
    return runner, answer
