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
  roles in one statement), the permission and the throttle (rates off, as every bench runs).

Each probe runs ``--requests`` times per round, the probes interleaved, ``--rounds`` rounds; printed:
the median and the lowest CPU microseconds per request (``time.process_time``), and the differences
that attribute them. No assertion: it prints.

    .venv/bin/python bench/request_overhead.py                   # ~30 s
    .venv/bin/python bench/request_overhead.py --requests 5000 --rounds 5
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

from _cost import load_average
from _stack import ROOT, UNTHROTTLED, database_url, ensure_database, machine_line

DEFAULT_DB = "hitl_bench_overhead"
PROBES = {
    "plain Django view, no middleware": "/_probe/plain",
    "plain Django view": "/_probe/plain",
    "DRF view, no authentication": "/_probe/drf",
    "DRF view, no authentication, SELECT 1": "/_probe/drf-query",
    "DRF view, token authentication": "/_probe/drf-token",
}


def setup(db: str, *, fresh: bool, pool: bool) -> str:
    """Django set up against ``db`` (migrated), the probe URLs in front; alice's token. ``pool``: the
    connection pool, as the servers run; else the thread keeps one connection across requests."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "hitl_project.settings.base"
    os.environ["DATABASE_URL"] = database_url(db) if pool else database_url(db) + "?conn_max_age=600"
    os.environ["HITL_DB_POOL"] = "true" if pool else "false"
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ.update(UNTHROTTLED)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="hitl-bench-overhead-metrics-")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    created = ensure_database(db, fresh=fresh)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from harnesses.users import make_user

    call_command("migrate", "--noinput", verbosity=0)
    print(f"database {db}: {'created' if created else 'reused'} and migrated", flush=True)
    settings.ROOT_URLCONF = "_overhead_urls"
    user = User.objects.filter(username="alice").first() or make_user("alice")
    return Token.objects.get(user=user).key


def caller(token: str, *, middleware: bool) -> Callable[[str], int]:
    """A function that POSTs an empty JSON object to a path through a WSGI handler; its status."""
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler

    kept = settings.MIDDLEWARE
    if not middleware:
        settings.MIDDLEWARE = []
    handler = WSGIHandler()  # reads the middleware now
    settings.MIDDLEWARE = kept
    authorization = f"Token {token}"

    def post(path: str) -> int:
        environ = {
            "REQUEST_METHOD": "POST",
            "SCRIPT_NAME": "",
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "HTTP_HOST": "127.0.0.1",
            "HTTP_AUTHORIZATION": authorization,
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": "2",
            "wsgi.input": io.BytesIO(b"{}"),
            "wsgi.errors": sys.stderr,
            "wsgi.url_scheme": "http",
            "wsgi.version": (1, 0),
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        status: list[int] = []
        response = handler(environ, lambda line, headers, exc_info=None: status.append(int(line[:3])))
        try:
            b"".join(response)
        finally:
            response.close()  # request_finished: the connection goes back to the pool
        return status[0]

    return post


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
    args = parser.parse_args()

    token = setup(args.db, fresh=args.fresh, pool=not args.no_pool)
    with_middleware, without_middleware = caller(token, middleware=True), caller(token, middleware=False)
    callers = {
        name: without_middleware if name.endswith("no middleware") else with_middleware for name in PROBES
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
        print(f"  {name:42s} median {median[name]:7.1f} us   lowest {min(values):7.1f} us")
    print("attributed (differences of the medians):")
    steps = [
        ("the middleware", "plain Django view", "plain Django view, no middleware"),
        ("DRF's request and response", "DRF view, no authentication", "plain Django view"),
        (
            "the first query (SELECT 1), its connection",
            "DRF view, no authentication, SELECT 1",
            "DRF view, no authentication",
        ),
        (
            "token auth, permission, throttle (its query for SELECT 1)",
            "DRF view, token authentication",
            "DRF view, no authentication, SELECT 1",
        ),
    ]
    for what, more, less in steps:
        print(f"  {what:58s} {median[more] - median[less]:7.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
