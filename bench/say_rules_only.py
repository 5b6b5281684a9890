#!/usr/bin/env python
"""Latency and throughput of `say` on a rules-only pipeline (no LLM, no pause), against a live server.

Each request is `POST /agents/{conversationId}` with "hello" (parser -> behavior rules -> output ->
templating, answered "Hello!"), over keep-alive connections (httpx), as alice. A new conversation is
started every --per-conversation says (a say reads and returns a bounded window of steps, so
--per-conversation 0, one growing conversation, costs the same; bench/say_growth.py shows it).

    .venv/bin/python bench/say_rules_only.py                      # 500 says, 1 client, 1 worker
    .venv/bin/python bench/say_rules_only.py --workers 2          # two uvicorn workers
    .venv/bin/python bench/say_rules_only.py --workers 2 --nodelay --clients 2
    .venv/bin/python bench/say_rules_only.py --in-process     # same says through Django's WSGI handler

--in-process sends the says through Django's WSGI handler inside this process, called as a WSGI server
calls it (no HTTP, no server; the connection pool as the servers run it), against the same database, to
show what HTTP and the server add.
"""

from __future__ import annotations

import argparse
import io
import sys
import threading
import time
from json import dumps, loads
from typing import Any
from urllib.parse import urlencode

from _figures import machine_line, print_latency
from _stack import Stack, add_stack_args, start_conversation


class Answer:
    def __init__(self, status_code: int, content: bytes) -> None:
        self.status_code, self.content, self.text = status_code, content, content.decode()

    def json(self) -> Any:
        return loads(self.content)


class InProcessClient:
    """The part of httpx.Client's interface the bench uses, over Django's WSGI handler in this process,
    called as a WSGI server calls it (no HTTP, no server; the connection pool as the servers run it).

    Not DRF's test client: that adds bookkeeping of its own to every request (signal receivers connected
    and disconnected, a cookie jar, the request kept on the response) that no deployment runs."""

    def __init__(self, token: str, handler: Any = None) -> None:
        """``handler``: a WSGI handler of one's own (one built with other middleware); Django's, else."""
        from django.core.handlers.wsgi import WSGIHandler

        self.handler = handler if handler is not None else WSGIHandler()
        self.authorization = f"Token {token}"

    def post(self, url: str, json: dict | None = None, params: dict | None = None) -> Answer:
        body = dumps(json or {}).encode()
        query = urlencode(params or {})
        environ = {
            "REQUEST_METHOD": "POST",
            "SCRIPT_NAME": "",
            "PATH_INFO": url,
            "QUERY_STRING": query,
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "HTTP_HOST": "127.0.0.1",
            "HTTP_AUTHORIZATION": self.authorization,
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.url_scheme": "http",
            "wsgi.version": (1, 0),
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        status: list[int] = []
        response = self.handler(environ, lambda line, headers, exc_info=None: status.append(int(line[:3])))
        try:
            content = b"".join(response)
        finally:
            response.close()  # request_finished: the connection goes back to the pool, as under a server
        return Answer(status[0], content)


def run_client(
    stack: Stack,
    count: int,
    per_conversation: int,
    latencies: list[float],
    errors: list[str],
    positions: list[int] | None = None,
    in_process: bool = False,
) -> None:
    client = InProcessClient(stack.tokens["alice"]) if in_process else stack.client("alice")
    conversation_id = start_conversation(client, stack.agent_id)
    said = 0
    for _ in range(count):
        if per_conversation and said >= per_conversation:
            conversation_id = start_conversation(client, stack.agent_id)
            said = 0
        t0 = time.perf_counter()
        response = client.post(f"/agents/{conversation_id}", json={"input": "hello"})
        elapsed = time.perf_counter() - t0
        said += 1
        if response.status_code != 200:
            errors.append(f"{response.status_code} {response.text[:200]}")
            continue
        body = response.json()
        if (
            body.get("state") != "READY"
            or not body.get("output")
            or not body["output"][0].startswith("Hello")
        ):
            errors.append(f"unexpected snapshot: state={body.get('state')} output={body.get('output')}")
            continue
        latencies.append(elapsed)
        if positions is not None:
            positions.append(said)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", "--requests", type=int, default=500, help="says in total (default 500)")
    parser.add_argument(
        "--clients", type=int, default=1, help="concurrent clients, one thread each (default 1)"
    )
    parser.add_argument(
        "--per-conversation",
        type=int,
        default=20,
        help="says per conversation before a new one is started; 0: one conversation (default 20)",
    )
    parser.add_argument("--warmup", type=int, default=20, help="untimed says first (default 20)")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="through Django's WSGI handler in this process instead of HTTP (one client)",
    )
    add_stack_args(parser, qcluster=False)
    args = parser.parse_args()

    with Stack.from_args(args) as stack:
        warm_latencies: list[float] = []
        if args.in_process:
            args.clients = 1
        run_client(stack, args.warmup, args.per_conversation, warm_latencies, [], in_process=args.in_process)
        latencies: list[float] = []
        errors: list[str] = []
        positions: list[int] = []
        per_client = [
            args.requests // args.clients + (1 if i < args.requests % args.clients else 0)
            for i in range(args.clients)
        ]
        threads = [
            threading.Thread(
                target=run_client,
                args=(stack, n, args.per_conversation, latencies, errors, positions, args.in_process),
            )
            for n in per_client
        ]
        t0 = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - t0

    print(machine_line())
    server = (
        f"uvicorn --workers {args.workers}{' +TCP_NODELAY' if args.nodelay else ''}"
        if not args.in_process
        else "IN PROCESS (Django's WSGI handler, no HTTP)"
    )
    print(
        f"say 'hello' (rules only): {args.requests} requests, {args.clients} client(s), {server}, "
        f"{args.per_conversation or 'unbounded'} says per conversation"
    )
    print_latency("say latency", latencies)
    print(f"throughput: {len(latencies) / wall:.1f} req/s ({wall:.2f} s wall)")
    if args.clients == 1 and len(latencies) >= 100:  # does a turn get slower as the conversation grows?
        tenth = len(latencies) // 10
        by_position = sorted(zip(positions, latencies, strict=True))
        print_latency(
            f"  says {by_position[0][0]}-{by_position[tenth - 1][0]} of a conversation",
            [t for _, t in by_position[:tenth]],
        )
        print_latency(
            f"  says {by_position[-tenth][0]}-{by_position[-1][0]} of a conversation",
            [t for _, t in by_position[-tenth:]],
        )
    print(f"errors: {len(errors)}")
    for error in errors[:5]:
        print(f"  {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
