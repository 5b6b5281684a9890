"""The filters of the audit ledger (``/audit/entries``, ``/audit/export``, ``manage.py hitl_audit_export``):
read from a query string or the command's options, every bad value collected so one 400 names them all."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from approvals.audit_selectors import audit_entries
from approvals.models import AuditEntry
from common.body_rules import unstorable_text_problem
from common.errors import BadRequest

BIGINT_MAX = 2**63 - 1
# PostgreSQL refuses a UTC offset of 16 hours or more ("time zone displacement out of range").
MAX_UTC_OFFSET = datetime.timedelta(hours=15, minutes=59, seconds=59)


class AuditFilterParser:
    """Reads the query string, collecting every bad value so one 400 names them all."""

    def __init__(self, params: Any) -> None:
        self.params = params
        self.errors: list[dict[str, str]] = []

    def text(self, name: str) -> str | None:
        raw = self.params.get(name) or None
        problem = unstorable_text_problem(raw) if raw else None
        if problem is not None:
            self.errors.append({"field": name, "message": problem})
            return None
        return raw

    def uuid(self, name: str) -> uuid.UUID | None:
        raw = self.params.get(name)
        if not raw:
            return None
        try:
            return uuid.UUID(raw)
        except ValueError:
            self.errors.append({"field": name, "message": f"'{raw}' is not a UUID."})
            return None

    def datetime(self, name: str) -> datetime.datetime | None:
        raw = (self.params.get(name) or "").strip()
        if not raw:
            return None
        try:
            # An unencoded '+' of a UTC offset arrives as a space.
            value = parse_datetime(raw) or parse_datetime("+".join(raw.rsplit(" ", 1)))
        except ValueError:
            value = None
        if value is None:
            self.errors.append(
                {
                    "field": name,
                    "message": f"'{raw}' is not an ISO-8601 date-time, e.g. 2026-11-30T10:15:30Z.",
                }
            )
            return None
        if not timezone.is_aware(value):
            return value.replace(tzinfo=datetime.UTC)
        offset = value.utcoffset()
        if offset is not None and abs(offset) > MAX_UTC_OFFSET:
            self.errors.append(
                {"field": name, "message": f"'{raw}' has a UTC offset outside -15:59..+15:59."}
            )
            return None
        return value

    def integer(self, name: str, *, default: int, low: int, high: int | None = None) -> int:
        raw = self.params.get(name)
        if raw in (None, ""):
            return default
        try:
            value = int(raw)
        except ValueError:
            self.errors.append({"field": name, "message": f"'{raw}' is not an integer."})
            return default
        return max(low, min(BIGINT_MAX if high is None else high, value))

    def raise_if_invalid(self) -> None:
        if self.errors:
            detail = "; ".join(f"{error['field']}: {error['message']}" for error in self.errors)
            raise BadRequest(detail, errors=self.errors)


def filtered_audit_entries(query: AuditFilterParser) -> QuerySet[AuditEntry]:
    """The entries the filters of ``/audit/entries`` and ``/audit/export`` select (errors collected in ``query``)."""
    return audit_entries(
        conversation=query.uuid("conversation"),
        pause=query.uuid("pause"),
        actor=query.text("actor"),
        verb=query.text("verb"),
        since=query.datetime("since"),
        until=query.datetime("until"),
    )
