"""Races decided by compare-and-set on real PostgreSQL, with real threads."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from approvals.models import AuditEntry, Pause, PauseStatus
from tests.conftest import client_for, make_user
from tests.factories import paused_conversation

pytestmark = pytest.mark.django_db(transaction=True)


def _race(callables):
    barrier = threading.Barrier(len(callables))
    results: list = [None] * len(callables)

    def run(index, call):
        try:
            barrier.wait()
            results[index] = call()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(callables)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


@pytest.mark.usefixtures("continuations_queued")
def test_at_most_once_decision_twenty_concurrent_resumes_exactly_one_wins():
    alice = make_user("alice")
    approvers = [make_user(f"approver{i}", "approver") for i in range(20)]
    conversation_id = paused_conversation(client_for(alice))
    clients = [client_for(a) for a in approvers]

    def resume(client):
        return lambda: (
            client.post(
                f"/agents/{conversation_id}/resume", {"verdict": "APPROVED"}, format="json"
            ).status_code
        )

    statuses = _race([resume(c) for c in clients])
    assert sorted(statuses) == [200] + [409] * 19
    pause = Pause.objects.get(subject_id=conversation_id)
    assert pause.status == PauseStatus.RESOLVING
    assert AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval").count() == 1


def test_resume_racing_cancel_exactly_one_wins():
    alice = make_user("alice")
    approver = make_user("approver", "approver")
    for _ in range(5):
        conversation_id = paused_conversation(client_for(alice))
        resume_client, cancel_client = client_for(approver), client_for(alice)
        statuses = _race(
            [
                lambda c=resume_client, cid=conversation_id: (
                    c.post(f"/agents/{cid}/resume", {"verdict": "APPROVED"}, format="json").status_code
                ),
                lambda c=cancel_client, cid=conversation_id: c.post(f"/agents/{cid}/cancel").status_code,
            ]
        )
        pause = Pause.objects.get(subject_id=conversation_id)
        decisions = AuditEntry.objects.filter(pause_id=pause.id, verb="hitl.approval")
        assert decisions.count() == 1
        if statuses[0] == 200:
            # the decision won; the cancel then interrupted the running turn, which is allowed
            assert decisions.get().verdict == "APPROVED"
        else:
            assert statuses == [409, 200]
            assert pause.status == PauseStatus.CANCELLED and decisions.get().verdict == "CANCELLED"
