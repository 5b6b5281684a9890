"""Approval-request lists with a large backlog of pending requests (bench/approval_requests.py).

``seed`` inserts ``rows`` PENDING approval requests, each with its PENDING pause of the ``request``
surface (as filing writes them), in one ``INSERT … SELECT generate_series`` statement: the accounts are
spread over ``accounts`` service accounts made in bulk with SQL, a share ``agent_share`` belongs to the
timed agent, and a share ``person_share`` is made on behalf of alice. ``decided`` more, approved and
newer than every pending one, are the history a list of pending requests must not walk through. Every synthetic row has the reason
``MARK``, so ``remove`` deletes exactly them (at the start and, unless ``--keep``, at the end).

``plans`` takes EXPLAIN (ANALYZE, BUFFERS) of the SQL the ORM makes for each list
(approval_requests.selectors.visible_requests), ``list_statements`` counts the statements a list runs
through the view in process, and ``time_list`` times the list over HTTP.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
from _service_accounts import PINNED

MARK = "bench-approval-request-inbox"
ACCOUNT_PREFIX = "bench_request_agent_"
LIMIT = 50

ACCOUNTS_SQL = """
INSERT INTO auth_user (password, last_login, is_superuser, username, first_name, last_name, email,
                       is_staff, is_active, date_joined)
SELECT '!', NULL, false, %(prefix)s || lpad(g::text, 3, '0'), '', '', '', false, true, now()
FROM generate_series(1, %(accounts)s) AS g
ON CONFLICT (username) DO NOTHING
"""

# One statement: the requests and their pauses share the ids drawn in ``seeded`` (materialized once).
SEED_SQL = """
WITH seeded AS MATERIALIZED (
    SELECT gen_random_uuid() AS request_id, gen_random_uuid() AS pause_id, g,
           CASE WHEN random() < %(agent_share)s THEN %(agent)s
                ELSE (%(accounts)s::int[])[1 + (g %% cardinality(%(accounts)s::int[]))] END AS account_id,
           CASE WHEN random() < %(person_share)s THEN %(person)s::int END AS person_id,
           now() - %(age)s::interval + g * interval '10 milliseconds' AS at
    FROM generate_series(1, %(rows)s) AS g
), requests AS (
    INSERT INTO approval_requests_approvalrequest (
        id, idempotency_key, filing_digest, agent, action_name, arguments, reason, context, hitl_config,
        callback_url, request_preview, request_fingerprint, secret_digests, status, pause_id, created_at,
        decided_at, approved_arguments, approved_request, approved_fingerprint, grant_expires_at, claim_id,
        claimed_at, outcome_status, outcome_http_status, outcome_summary, outcome_at, account_id,
        on_behalf_of_id)
    SELECT request_id, 'bench-inbox-' || %(status)s || '-' || g, md5(g::text) || md5(request_id::text), 'refund-bot', 'refund',
           jsonb_build_object('orderId', 'A-' || g, 'amount', 250), %(mark)s, NULL, '{}',
           '', %(preview)s::jsonb, md5(request_id::text) || md5(g::text), '{}', %(status)s, pause_id, at,
           CASE WHEN %(decided)s THEN at + interval '1 minute' END,
           CASE WHEN %(decided)s THEN jsonb_build_object('orderId', 'A-' || g, 'amount', 250) END,
           CASE WHEN %(decided)s THEN %(preview)s::jsonb END, '',
           CASE WHEN %(decided)s THEN at + interval '16 minutes' END, NULL,
           NULL, '', NULL, '', NULL, account_id,
           person_id
    FROM seeded
)
INSERT INTO approvals_pause (
    id, surface, kind, subject_type, subject_id, agent_id, agent_version, group_id, epoch, status, reason,
    timeout_policy, approval_timeout, paused_at, due_at, bookmark, details, tool_names, verdict, note,
    decided_by, automated, decided_at, decision_details, lease_until, resolved_at, schedule_id,
    decided_by_user_id, owner_id, fire_claimed_until, allow_self_approval, raised_by_id, cancel_requested_at,
    cancel_requested_by)
SELECT pause_id, 'request', 'ACTION', 'approval_request', request_id, NULL, NULL, NULL, gen_random_uuid(),
       %(pause_status)s, %(mark)s,
       'WAIT_INDEFINITELY', '', at, NULL, jsonb_build_object('pausedAt', at),
       '{"agent": "refund-bot", "account": "bench"}', '["refund"]', %(verdict)s, '',
       CASE WHEN %(decided)s THEN 'approver' ELSE '' END, false,
       CASE WHEN %(decided)s THEN at + interval '1 minute' END, '{}', NULL,
       CASE WHEN %(decided)s THEN at + interval '1 minute' END, NULL,
       NULL, NULL, NULL, true, person_id, NULL,
       ''
FROM seeded
"""


def _preview() -> str:
    """The pinned request as a filed request stores it (approval_requests.pinning.preview)."""
    import json

    from approval_requests import pinning

    return json.dumps(pinning.preview(pinning.parsed(PINNED)))


def remove(conn: Any) -> int:
    """Deletes the synthetic requests and pauses, then vacuums both tables so that the next seed reuses
    their space (``conn`` in autocommit); how many requests there were."""
    conn.execute("DELETE FROM approvals_pause WHERE reason = %s AND surface = 'request'", (MARK,))
    removed = conn.execute(
        "DELETE FROM approval_requests_approvalrequest WHERE reason = %s", (MARK,)
    ).rowcount
    if removed:
        conn.execute("VACUUM approval_requests_approvalrequest")
        conn.execute("VACUUM approvals_pause")
    return removed


def seed(
    conn: Any,
    *,
    rows: int,
    decided: int,
    accounts: int,
    agent_id: int,
    agent_share: float,
    person_id: int,
    person_share: float,
) -> float:
    """Inserts the backlog (see the module) and analyzes both tables; the seconds it took. ``decided``
    more requests, approved a minute after they were filed and newer than every pending one, stand for
    the history a list of pending requests must not walk through."""
    started = time.perf_counter()
    conn.execute(ACCOUNTS_SQL, {"prefix": ACCOUNT_PREFIX, "accounts": accounts})
    account_ids = [
        row[0]
        for row in conn.execute(
            "SELECT id FROM auth_user WHERE username LIKE %s ORDER BY id LIMIT %s",
            (ACCOUNT_PREFIX + "%", accounts),
        )
    ]
    common = {
        "accounts": account_ids,
        "agent": agent_id,
        "agent_share": agent_share,
        "person": person_id,
        "person_share": person_share,
        "mark": MARK,
        "preview": _preview(),
    }
    pending = {
        "status": "PENDING",
        "pause_status": "PENDING",
        "verdict": "",
        "decided": False,
        "age": "30 days",
    }
    conn.execute(SEED_SQL, {**common, **pending, "rows": rows})
    if decided:
        approved = {"status": "APPROVED", "pause_status": "RESOLVED", "verdict": "APPROVED", "decided": True}
        conn.execute(SEED_SQL, {**common, **approved, "rows": decided, "age": "1 day"})
    seconds = time.perf_counter() - started
    conn.execute("VACUUM (ANALYZE) approval_requests_approvalrequest")
    conn.execute("VACUUM (ANALYZE) approvals_pause")
    return seconds


def backlog(conn: Any, *, agent: str, person: str) -> dict[str, Any]:
    """The pending requests in all, the timed agent's and those made for ``person``; the tables' sizes."""
    pending, of_agent, for_person = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE a.username = %s), count(*) FILTER (WHERE p.username = %s) "
        "FROM approval_requests_approvalrequest r JOIN auth_user a ON a.id = r.account_id "
        "LEFT JOIN auth_user p ON p.id = r.on_behalf_of_id WHERE r.status = 'PENDING'",
        (agent, person),
    ).fetchone()
    requests_size, pauses_size = conn.execute(
        "SELECT pg_size_pretty(pg_relation_size('approval_requests_approvalrequest')), "
        "pg_size_pretty(pg_relation_size('approvals_pause'))"
    ).fetchone()
    return {
        "pending": pending,
        "agent": of_agent,
        "person": for_person,
        "requests_size": requests_size,
        "pauses_size": pauses_size,
    }


def list_queryset(username: str, status: str | None) -> Any:
    """The queryset the list view reads for ``username`` (``?status=…&limit=50``)."""
    from django.contrib.auth import get_user_model

    from approval_requests.selectors import visible_requests

    user = get_user_model().objects.get(username=username)
    return user, visible_requests(user, status=status)[:LIMIT]


def plans(conn: Any, lists: dict[str, tuple[str, str | None]]) -> dict[str, tuple[str, str, float]]:
    """{list: (SQL, EXPLAIN ANALYZE, SQL alone p95 ms over 50 runs)} of each list's ORM query."""
    from _figures import summarize

    found = {}
    for name, (username, status) in lists.items():
        _, queryset = list_queryset(username, status)
        sql, params = queryset.query.sql_with_params()
        conn.execute(sql, params).fetchall()  # warm the cache
        rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall()
        samples = []
        for _ in range(50):
            started = time.perf_counter()
            conn.execute(sql, params).fetchall()
            samples.append(time.perf_counter() - started)
        shown = "SELECT … " + sql[sql.index(" FROM ") + 1 :]
        found[name] = (shown, "\n".join("    " + row[0] for row in rows), summarize(samples)["p95"])
    return found


def list_statements(username: str, params: dict[str, Any]) -> int:
    """How many statements one list runs through the real view, in process (DRF's test client, signed in
    without the token's lookup): the page's and those of its rows' representations."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(get_user_model().objects.get(username=username))
    with CaptureQueriesContext(connection) as captured:
        answer = client.get("/approval-requests", params)
    if answer.status_code != 200:
        raise RuntimeError(f"list in process: {answer.status_code} {answer.content[:200]!r}")
    return len(captured.captured_queries)


def time_list(client: httpx.Client, params: dict[str, Any], requests: int) -> tuple[list[float], int, int]:
    """The latencies of ``requests`` lists after one untimed, the rows of a page and its bytes."""
    client.get("/approval-requests", params=params).raise_for_status()
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        answer = client.get("/approval-requests", params=params)
        samples.append(time.perf_counter() - started)
        answer.raise_for_status()
    return samples, len(answer.json()["approvalRequests"]), len(answer.content)
