#!/usr/bin/env python
"""Does `say` get slower as the conversation grows? Says 1-50 against says 451-500 of one conversation.

In-process, no HTTP: Django is set up here against its own database (``hitl_bench_say``, created if
missing, ``--fresh`` recreates it), with the base settings; alice says "hello" to the
``account_bot()`` agent of harnesses/factories.py (parser -> behavior rules -> output -> templating,
answered "Hello!") through DRF's test client, so each say is the whole view: the turn and the
snapshot it answers with. ``--rounds`` conversations of ``--steps`` says each, one after the other.

Prints, per position band, the latency (p50/mean), and then for one say early and one late in a
conversation: the SQL statements it ran, the step rows they returned, and the size of the answer.

    .venv/bin/python bench/say_growth.py                 # 2 conversations of 500 says (~1 min)
    .venv/bin/python bench/say_growth.py --steps 1000 --band 100
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from _figures import machine_line, summarize
from _stack import django_in_process

DEFAULT_DB = "hitl_bench_say"


def setup(db: str, *, fresh: bool) -> None:
    django_in_process(db, fresh=fresh, pool=False)


def client_and_agent() -> tuple[Any, str]:
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from conversations.agents import create_agent, deploy_agent
    from harnesses.factories import account_bot
    from harnesses.users import make_user

    user = User.objects.filter(username="alice").first() or make_user("alice")
    row = create_agent(document=account_bot())
    deploy_agent(agent_id=row.agent_id, version=row.version, environment="production")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get(user=user).key}")
    return client, str(row.agent_id)


def start(client: Any, agent_id: str) -> str:
    response = client.post(f"/agents/{agent_id}/start?environment=production")
    assert response.status_code == 201, response.content[:300]
    return response.json()["conversationId"]


def say(client: Any, conversation_id: str) -> Any:
    response = client.post(f"/agents/{conversation_id}", {"input": "hello"}, format="json")
    assert response.status_code == 200, response.content[:300]
    body = response.json()
    assert body["state"] == "READY" and body["output"] == ["Hello!"], body["output"]
    return response


def measured_say(client: Any, conversation_id: str) -> dict[str, Any]:
    """One say with its SQL statements captured: how many, and how many step rows they returned."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from conversations.models import ConversationStep

    step_table = f'FROM "{ConversationStep._meta.db_table}"'
    step_rows: list[int] = []

    def count_step_rows(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.lstrip().upper().startswith("SELECT") and step_table in sql:
            step_rows.append(max(0, context["cursor"].rowcount))
        return result

    with CaptureQueriesContext(connection) as captured, connection.execute_wrapper(count_step_rows):
        response = say(client, conversation_id)
    body = response.json()
    return {
        "queries": len(captured.captured_queries),
        "step_rows": sum(step_rows),
        "bytes": len(response.content),
        "steps_in_answer": len(body["steps"]),
        "step_count": body.get("stepCount"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=500, help="says per conversation (default 500)")
    parser.add_argument("--band", type=int, default=50, help="says compared at each end (default 50)")
    parser.add_argument("--rounds", type=int, default=2, help="conversations (default 2)")
    parser.add_argument(
        "--warmup", type=int, default=20, help="untimed says in a conversation of their own first"
    )
    parser.add_argument("--db", default=DEFAULT_DB, help=f"database (default {DEFAULT_DB})")
    parser.add_argument("--fresh", action="store_true", help="drop and recreate the database first")
    args = parser.parse_args()
    assert 0 < args.band <= args.steps // 2, "--band must be at most half of --steps"

    print(machine_line(), f"load average {os.getloadavg()[0]:.1f}", flush=True)
    setup(args.db, fresh=args.fresh)
    client, agent_id = client_and_agent()
    warm = start(client, agent_id)
    for _ in range(args.warmup):
        say(client, warm)

    early: list[float] = []
    late: list[float] = []
    t0 = time.perf_counter()
    for _ in range(args.rounds):
        conversation_id = start(client, agent_id)
        for position in range(1, args.steps + 1):
            began = time.perf_counter()
            say(client, conversation_id)
            elapsed = time.perf_counter() - began
            if position <= args.band:
                early.append(elapsed)
            elif position > args.steps - args.band:
                late.append(elapsed)
    wall = time.perf_counter() - t0
    short = start(client, agent_id)
    for _ in range(args.band // 2 - 1):
        say(client, short)
    at_early = measured_say(client, short)  # say number band/2
    at_late = measured_say(client, conversation_id)  # say number steps + 1

    first, last = summarize(early), summarize(late)
    print(
        f"say 'hello' in-process (DRF test client), {args.rounds} conversations x {args.steps} says, "
        f"{wall:.1f} s, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"  says 1-{args.band}: p50 {first['p50']:.2f} ms, mean {first['mean']:.2f} ms (n={first['count']})"
    )
    print(
        f"  says {args.steps - args.band + 1}-{args.steps}: p50 {last['p50']:.2f} ms, "
        f"mean {last['mean']:.2f} ms (n={last['count']})"
    )
    print(f"  late / early: p50 {last['p50'] / first['p50']:.2f}x, mean {last['mean'] / first['mean']:.2f}x")
    for label, figures in ((f"say {args.band // 2}", at_early), (f"say {args.steps + 1}", at_late)):
        print(
            f"  {label}: {figures['queries']} SQL statements, {figures['step_rows']} step rows read, "
            f"answer {figures['bytes']} bytes with {figures['steps_in_answer']} steps "
            f"(stepCount {figures['step_count']})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
