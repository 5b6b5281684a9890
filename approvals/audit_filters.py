"""The filters of the audit ledger (``/audit/entries``, ``/audit/export``, ``manage.py hitl_audit_export``),
read from a query string or the command's options; every bad value is collected in the ``QueryParams``
so one 400 names them all."""

from __future__ import annotations

from django.db.models import QuerySet

from approvals.audit_selectors import audit_entries
from approvals.models import AuditEntry
from common.query_params import QueryParams


def filtered_audit_entries(query: QueryParams) -> QuerySet[AuditEntry]:
    """The entries the filters of ``/audit/entries`` and ``/audit/export`` select (errors collected in ``query``)."""
    return audit_entries(
        conversation=query.uuid("conversation"),
        pause=query.uuid("pause"),
        actor=query.text("actor"),
        verb=query.text("verb"),
        since=query.datetime("since"),
        until=query.datetime("until"),
    )
