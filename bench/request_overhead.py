#!/usr/bin/env python
"""What a REST request pays before its view does anything: CPU per request, in process, one thread.

Django's WSGI handler is called here as a WSGI server calls it (no HTTP, no server), with the project's
settings, middleware and connection pool (``HITL_DB_POOL=true``, as the servers run; ``--no-pool``: one
connection kept across requests instead), against its own
database (``hitl_bench_overhead``, created if missing, ``--fresh`` recreates it). Probe views are added
beside the project's URLs (``bench/_overhead_urls.py``), each a step further towards a real request:

- a plain Django view: the handler and the middleware (and again with no middleware at all);
- a DRF view with no authentication, no permission and no throttle: DRF's own request and response;
- the same view running ``SELECT 1``: taking a connection from the pool, the query, returning it;
- a DRF view with the project's defaults: token authentication (the token, its user and the user's
  roles, kept by the process after the first request: approvals.credential_cache), the permission and
  the throttle (rates off, as every bench runs);
- the same with nothing kept (``HITL_CREDENTIAL_CACHE_SECONDS`` 0): the token's statement on every
  request, in place of ``SELECT 1``.

Each probe runs ``--requests`` times per round, the probes interleaved, ``--rounds`` rounds; printed:
the median and the lowest CPU microseconds per request (``time.process_time``), and the differences
that attribute them. With ``--instructions``, the instructions per request instead, counted by valgrind
(each probe in a child process run twice, 20 and 120 requests, the difference over 100): a figure the
machine's load does not move, so it attributes a few percent that the timings cannot. No assertion: it
prints.

    .venv/bin/python bench/request_overhead.py                   # ~30 s
    .venv/bin/python bench/request_overhead.py --requests 5000 --rounds 5
    .venv/bin/python bench/request_overhead.py --instructions    # ~5 min, needs valgrind
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

from _cost import load_average
from _figures import machine_line
from _stack import PYTHON, django_in_process
from _valgrind import per_repetition, require_valgrind

DEFAULT_DB = "hitl_bench_overhead"
PROBES = {
    "plain Django view, no middleware": "/_probe/plain",
    "plain Django view": "/_probe/plain",
    "DRF view, no authentication": "/_probe/drf",
    "DRF view, no authentication, SELECT 1": "/_probe/drf-query",
    "DRF view, token authentication": "/_probe/drf-token",
    "DRF view, token authentication, nothing kept": "/_probe/drf-token",
}
NOTHING_KEPT = "nothing kept"


def setup(db: str, *, fresh: bool, pool: bool) -> str:
    """Django set up against ``db`` (migrated), the probe URLs in front; alice's token. ``pool``: the
    connection pool, as the servers run; else the thread keeps one connection across requests."""
    django_in_process(db, fresh=fresh, pool=pool, keep_connection=not pool)
    from django.conf import settings
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from harnesses.users import make_user

    settings.ROOT_URLCONF = "_overhead_urls"
    user = User.objects.filter(username="alice").first() or make_user("alice")
    return Token.objects.get(user=user).key


def caller(token: str, *, middleware: bool, keep_tokens: bool = True) -> Callable[[str], int]:
    """A function that POSTs an empty JSON object to a path through a WSGI handler; its status.
    ``keep_tokens`` false: with the credential cache off for its requests."""
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler
    from say_rules_only import InProcessClient

    kept = settings.MIDDLEWARE
    if not middleware:
        settings.MIDDLEWARE = []
    client = InProcessClient(token, handler=WSGIHandler())  # the handler reads the middleware now
    settings.MIDDLEWARE = kept
    if keep_tokens:
        return lambda path: client.post(path, json={}).status_code

    def post_keeping_nothing(path: str) -> int:
        seconds, settings.HITL_CREDENTIAL_CACHE_SECONDS = settings.HITL_CREDENTIAL_CACHE_SECONDS, 0
        try:
            return client.post(path, json={}).status_code
        finally:
            settings.HITL_CREDENTIAL_CACHE_SECONDS = seconds

    return post_keeping_nothing


STEPS = [
    ("the middleware", "plain Django view", "plain Django view, no middleware"),
    ("DRF's request and response", "DRF view, no authentication", "plain Django view"),
    (
        "the first query (SELECT 1), its connection",
        "DRF view, no authentication, SELECT 1",
        "DRF view, no authentication",
    ),
    (
        "token auth (the token kept), permission, throttle",
        "DRF view, token authentication",
        "DRF view, no authentication",
    ),
    (
        "token auth with its statement, for SELECT 1 (nothing kept)",
        "DRF view, token authentication, nothing kept",
        "DRF view, no authentication, SELECT 1",
    ),
]


def print_attributed(heading: str, figures: dict[str, float], unit: str) -> None:
    """Each step's share: the difference of the two probes' figures."""
    print(heading)
    for what, more, less in STEPS:
        print(f"  {what:58s} {figures[more] - figures[less]:8.1f} {unit}")


def child(db: str, probe: str, requests: int) -> None:
    """One probe's requests in this process (under valgrind): 20 to warm up, then ``requests``."""
    token = setup(db, fresh=False, pool=True)
    post = caller(
        token, middleware=not probe.endswith("no middleware"), keep_tokens=not probe.endswith(NOTHING_KEPT)
    )
    for _ in range(20 + requests):
        post(PROBES[probe])


def instructions(db: str) -> int:
    require_valgrind()
    setup(db, fresh=False, pool=True)  # the database migrated and alice made, once
    counts = {
        name: per_repetition(
            PYTHON, [__file__, "--db", db, "--child-probe", name], "--child-requests", 20, 100
        )
        for name in PROBES
    }
    print(machine_line())
    print("instructions per request (valgrind, in process, one thread, the pool; 100 requests past 20):")
    for name, value in counts.items():
        print(f"  {name:46s} {value / 1000:8.1f} K")
    print_attributed("attributed (differences):", {name: value / 1000 for name, value in counts.items()}, "K")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000, help="requests per probe and round (2000)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--db", default=DEFAULT_DB, help=f"its database (default {DEFAULT_DB})")
    parser.add_argument("--fresh", action="store_true", help="drop and recreate the database first")
    parser.add_argument(
        "--no-pool",
        action="store_true",
        help="keep one connection across requests (CONN_MAX_AGE) instead of the pool the servers use",
    )
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions with valgrind instead"
    )
    parser.add_argument("--child-probe", choices=list(PROBES), help=argparse.SUPPRESS)
    parser.add_argument("--child-requests", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_probe:
        child(args.db, args.child_probe, args.child_requests)
        return 0
    if args.instructions:
        return instructions(args.db)

    token = setup(args.db, fresh=args.fresh, pool=not args.no_pool)
    callers = {
        name: caller(
            token, middleware=not name.endswith("no middleware"), keep_tokens=not name.endswith(NOTHING_KEPT)
        )
        for name in PROBES
    }
    for name, path in PROBES.items():  # every probe answers, and warms up
        for _ in range(100):
            status = callers[name](path)
        if status != 200:
            raise SystemExit(f"{name}: {path} answered {status}")
    load_before = load_average()
    samples: dict[str, list[float]] = {name: [] for name in PROBES}
    for _ in range(args.rounds):
        for name, path in PROBES.items():
            post = callers[name]
            started = time.process_time()
            for _ in range(args.requests):
                post(path)
            samples[name].append((time.process_time() - started) / args.requests * 1e6)

    print(machine_line())
    print(
        f"CPU per request, in process, one thread, {'one kept connection' if args.no_pool else 'the pool'}: "
        f"{args.requests} requests x {args.rounds} rounds per probe "
        f"[load {load_before:.2f} -> {load_average():.2f}]"
    )
    median = {name: statistics.median(values) for name, values in samples.items()}
    for name, values in samples.items():
        print(f"  {name:46s} median {median[name]:7.1f} us   lowest {min(values):7.1f} us")
    print_attributed("attributed (differences of the medians):", median, "us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
