"""What ``GET /healthz`` reports: the database answers, and the keys the service needs can work.

Cheap, because load balancers poll it: one ``SELECT 1`` and a parse of the configured keys; no secret is
decrypted and nothing is written. Status ``ok`` (200), ``degraded`` (503: a key cannot work, or a
production setting refuses it; see approvals/checks.py) or ``unavailable`` (503: no database).
"""

from __future__ import annotations

from django.db import connection

from approvals.checks import audit_key_problem, health_text
from toolgate.checks import pinning_key_problem, secrets_key_problem


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # report, never raise
        return f"error: {type(exc).__name__}"
    return "ok"


def health_report() -> tuple[int, dict[str, object]]:
    """The HTTP status and body of ``/healthz``."""
    results = {
        "database": _database(),
        "secretStore": health_text(secrets_key_problem()),
        "auditKey": health_text(audit_key_problem()),
        "pinningKey": health_text(pinning_key_problem()),
    }
    if results["database"] != "ok":
        status = "unavailable"
    elif any(text.startswith("error:") for text in results.values()):
        status = "degraded"
    else:
        status = "ok"
    return (200 if status == "ok" else 503), {
        "status": status,
        "database": connection.vendor,
        "checks": results,
    }
