"""One heartbeat thread per process keeps every running claim alive (approvals.leases.kept_alive)."""

from __future__ import annotations

import threading
import time

from approvals.leases import kept_alive


def heartbeat_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "hitl-lease-heartbeat"]


def test_one_heartbeat_thread_renews_every_claim_held_at_once(settings):
    settings.HITL_CONTINUATION_LEASE_SECONDS = 1
    settings.HITL_LEASE_RENEW_SECONDS = 0.05
    first: list[object] = []
    second: list[object] = []
    with kept_alive(first.append, what="first"), kept_alive(second.append, what="second"):
        time.sleep(0.4)
        assert len(heartbeat_threads()) == 1
    assert len(first) >= 3 and len(second) >= 3


def test_claims_held_from_many_threads_share_the_heartbeat(settings):
    settings.HITL_CONTINUATION_LEASE_SECONDS = 1
    settings.HITL_LEASE_RENEW_SECONDS = 0.05
    renewed = [[] for _ in range(8)]

    def work(into: list[object]) -> None:
        with kept_alive(into.append, what="work"):
            time.sleep(0.3)

    workers = [threading.Thread(target=work, args=(into,)) for into in renewed]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert all(len(into) >= 2 for into in renewed), [len(into) for into in renewed]
    assert len(heartbeat_threads()) == 1


def test_leaving_waits_for_a_renewal_in_flight(settings):
    """When the block ends, its claim is no longer renewed: not even by a renewal that had started."""
    settings.HITL_CONTINUATION_LEASE_SECONDS = 1
    settings.HITL_LEASE_RENEW_SECONDS = 0.05
    started, finished = threading.Event(), []

    def slow_renew(until: object) -> None:
        started.set()
        time.sleep(0.2)
        finished.append(until)

    with kept_alive(slow_renew, what="slow"):
        assert started.wait(2)
    count = len(finished)
    assert count >= 1  # the renewal in flight finished before the block was left
    time.sleep(0.3)
    assert len(finished) == count


def test_a_failed_renewal_is_retried_at_the_next_beat(settings):
    settings.HITL_CONTINUATION_LEASE_SECONDS = 1
    settings.HITL_LEASE_RENEW_SECONDS = 0.05
    calls: list[object] = []

    def flaky(until: object) -> None:
        calls.append(until)
        if len(calls) == 1:
            raise RuntimeError("database away for a moment")

    with kept_alive(flaky, what="flaky"):
        time.sleep(0.3)
    assert len(calls) >= 3
