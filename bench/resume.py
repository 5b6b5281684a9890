#!/usr/bin/env python
"""Decision latency (`POST /agents/{id}/resume`, no wait) and how fast the q-cluster drains the continuations.

1. alice prepares N paused conversations (start, then say "please delete my account");
2. the approver resumes each one (APPROVED) and every request is timed: the reply comes once the
   decision, its audit entry and the queued continuation are committed;
3. the script polls PostgreSQL until every pause is RESOLVED and every conversation READY, and prints
   the drain throughput; then it checks each conversation's output ("Deletion APPROVED.") over REST.

By default the q-cluster runs all along (it drains while decisions arrive). With --queue-first it is
started only after the last decision, so the drain figure is the q-cluster alone. With
--after-response the web server runs each continuation itself once its answer is sent
(HITL_CONTINUE_AFTER_RESPONSE=true) instead of handing it to the q-cluster. Either way it prints the
CPU (web server, q-cluster, PostgreSQL) and transactions per decision from the first decision to the
end of the drain.

    .venv/bin/python bench/resume.py
    .venv/bin/python bench/resume.py --queue-first --q-workers 2
    .venv/bin/python bench/resume.py --after-response
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from _cost import CostMeter
from _figures import machine_line, print_latency
from _stack import Stack, add_stack_args, connect, counts, paused_conversation, sessions_opened


def pause_states(
    conn, pause_ids: list[str], conversation_ids: list[str]
) -> tuple[dict[str, int], dict[str, int]]:
    pauses = dict(
        conn.execute(
            "SELECT status, count(*) FROM approvals_pause WHERE id = ANY(%s::uuid[]) GROUP BY status",
            (pause_ids,),
        ).fetchall()
    )
    conversations = dict(
        conn.execute(
            "SELECT state, count(*) FROM conversations_conversation WHERE id = ANY(%s::uuid[]) GROUP BY state",
            (conversation_ids,),
        ).fetchall()
    )
    return pauses, conversations


def decide_each(approver, conversation_ids: list[str]) -> tuple[list[float], list[str], list[str]]:
    """Approve each conversation's pause, one request at a time: latencies (s), pause ids, errors."""
    latencies: list[float] = []
    pause_ids: list[str] = []
    errors: list[str] = []
    for conversation_id in conversation_ids:
        t = time.perf_counter()
        response = approver.post(
            f"/agents/{conversation_id}/resume", json={"verdict": "APPROVED", "note": "ok"}
        )
        elapsed = time.perf_counter() - t
        if response.status_code != 200:
            errors.append(f"resume {response.status_code} {response.text[:200]}")
            continue
        latencies.append(elapsed)
        pause_ids.append(response.json()["pauseId"])
    return latencies, pause_ids, errors


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "-n", "--conversations", type=int, default=300, help="paused conversations (default 300)"
    )
    parser.add_argument(
        "--queue-first", action="store_true", help="start the q-cluster only after every decision is queued"
    )
    parser.add_argument("--drain-timeout", type=float, default=120.0, help="seconds to wait for the drain")
    parser.add_argument(
        "--after-response",
        action="store_true",
        help="the web server runs each continuation after its answer (HITL_CONTINUE_AFTER_RESPONSE)",
    )
    add_stack_args(parser)
    args = parser.parse_args()
    run_qcluster = args.qcluster and not args.queue_first
    os.environ["HITL_CONTINUE_AFTER_RESPONSE"] = "true" if args.after_response else "false"

    with Stack.from_args(args, qcluster=run_qcluster) as stack, connect(stack.db, autocommit=True) as conn:
        alice, approver = stack.client("alice"), stack.client("approver")
        t0 = time.perf_counter()
        conversation_ids = [paused_conversation(alice, stack.agent_id) for _ in range(args.conversations)]
        prepare = time.perf_counter() - t0

        sessions_before = sessions_opened(conn)
        meter = CostMeter(db=stack.db, groups=stack.process_groups(), count_self=False)
        meter.begin()
        first_decision = time.perf_counter()
        latencies, pause_ids, errors = decide_each(approver, conversation_ids)
        last_decision = time.perf_counter()
        decisions_wall = last_decision - first_decision

        pauses, conversations = pause_states(conn, pause_ids, conversation_ids)
        drained_during = pauses.get("RESOLVED", 0)
        qcluster_start = None
        if args.queue_first and args.qcluster:
            qcluster_start = time.perf_counter()
            stack.start_qcluster()

        first_resolved = None
        done_at = None
        deadline = time.perf_counter() + args.drain_timeout
        while time.perf_counter() < deadline:
            pauses, conversations = pause_states(conn, pause_ids, conversation_ids)
            now = time.perf_counter()
            if first_resolved is None and pauses.get("RESOLVED", 0) > drained_during:
                first_resolved = now
            if pauses.get("RESOLVED", 0) == len(pause_ids) and conversations.get("READY", 0) == len(
                conversation_ids
            ):
                done_at = now
                break
            time.sleep(0.05)

        meter.end_cpu()
        sessions = sessions_opened(conn) - sessions_before
        outputs_ok = 0
        for conversation_id in conversation_ids:
            body = alice.get(f"/agents/{conversation_id}").json()
            if body.get("output") == ["Deletion APPROVED."]:
                outputs_ok += 1

    print(machine_line())
    print(
        f"resume: {args.conversations} paused conversations prepared in {prepare:.1f} s "
        f"({2 * args.conversations / prepare:.0f} req/s for start + say)"
    )
    print(
        f"{stack.describe_server()}, q-cluster {args.q_workers} workers "
        f"({'started after the last decision' if args.queue_first else 'running during the decisions'}); "
        f"continuations {'run by the web server after each answer' if args.after_response else 'queued'}"
    )
    print_latency("resume latency (no wait)", latencies)
    print(
        f"decisions: {len(latencies) / decisions_wall:.1f} req/s from one client ({decisions_wall:.2f} s); "
        f"errors: {len(errors)}"
    )
    for error in errors[:5]:
        print(f"  {error}")
    print(f"continuations already drained when the last decision returned: {drained_during}")
    if done_at is None:
        print(
            f"NOT DRAINED within {args.drain_timeout:.0f} s: pauses {counts(sorted(pauses.items()))}; "
            f"conversations {counts(sorted(conversations.items()))}"
        )
    else:
        total = len(pause_ids)
        print(
            f"drained: all {total} continuations done {done_at - first_decision:.2f} s after the first decision "
            f"({total / (done_at - first_decision):.1f} continuations/s end to end)"
        )
        if qcluster_start is not None:
            print(
                f"q-cluster alone: {done_at - qcluster_start:.2f} s from its start "
                f"(including ~its boot); first continuation at +{(first_resolved or done_at) - qcluster_start:.2f} s; "
                f"drain rate after the first: {(total - 1) / max(done_at - (first_resolved or done_at), 1e-9):.1f}/s"
            )
        else:
            print(
                f"after the last decision: {done_at - last_decision:.2f} s to drain the remaining "
                f"{total - drained_during}"
            )
    print(
        f"PostgreSQL sessions opened from the first decision to the drain: {sessions} "
        f"({sessions / max(len(pause_ids), 1):.1f} per decision)"
    )
    print(f"outputs 'Deletion APPROVED.': {outputs_ok}/{len(conversation_ids)}")
    meter.end_transactions()
    print("per decision, from the first decision to the end of the drain:")
    for line in meter.lines(max(len(pause_ids), 1)):
        print("  " + line.replace("per cycle", "per decision").replace(" cycles)", " decisions)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
