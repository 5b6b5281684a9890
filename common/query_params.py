"""Query-string parameters read as the API schema declares them: the one place the API parses them.

Each parameter is given at most once (``limit=1&limit=2`` is refused, not read as its last value). A typed
parameter (integer, UUID, date-time) must hold a value of its type when it is present, so ``limit=null``
and an empty ``until=`` are refused; only an absent one means its default. Numbers are clamped to their
range, not refused. A free-text filter that is empty is no filter. Every bad value is collected, so one
400 problem names them all (``errors``: one ``{"field", "message"}`` each).
"""

from __future__ import annotations

import datetime
import re
import uuid
from collections.abc import Mapping
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.request import Request

from common.body_rules import unstorable_text_problem
from common.errors import BadRequest

BIGINT_MAX = 2**63 - 1
# PostgreSQL refuses a UTC offset of 16 hours or more ("time zone displacement out of range").
MAX_UTC_OFFSET = datetime.timedelta(hours=15, minutes=59, seconds=59)
# what an integer looks like in a query string (Python's int() also takes "1_000", " 7" and other digits)
INTEGER = re.compile(r"-?[0-9]+")


class QueryParams:
    """Reads a query string (a QueryDict, or a plain mapping of one value each) parameter by parameter."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params = params
        self.errors: list[dict[str, str]] = []

    def refuse(self, name: str, message: str) -> None:
        self.errors.append({"field": name, "message": message})

    def single(self, name: str) -> str | None:
        """The parameter's one value; None when it is absent or (an error) given more than once."""
        getlist = getattr(self.params, "getlist", None)
        values = (
            getlist(name) if getlist is not None else ([self.params[name]] if name in self.params else [])
        )
        if len(values) > 1:
            self.refuse(name, f"given {len(values)} times; send it once.")
            return None
        return values[0] if values else None

    def text(self, name: str) -> str | None:
        raw = self.single(name) or None
        problem = unstorable_text_problem(raw) if raw else None
        if problem is not None:
            self.refuse(name, problem)
            return None
        return raw

    def uuid(self, name: str) -> uuid.UUID | None:
        raw = self.single(name)
        if raw is None:
            return None
        try:
            return uuid.UUID(raw)
        except ValueError:
            self.refuse(name, f"'{raw}' is not a UUID.")
            return None

    def datetime(self, name: str) -> datetime.datetime | None:
        raw = self.single(name)
        if raw is None:
            return None
        value = self._parsed_datetime(raw.strip())
        if value is None:
            self.refuse(name, f"'{raw}' is not an ISO-8601 date-time, e.g. 2026-11-30T10:15:30Z.")
            return None
        if not timezone.is_aware(value):
            return value.replace(tzinfo=datetime.UTC)
        offset = value.utcoffset()
        if offset is not None and abs(offset) > MAX_UTC_OFFSET:
            self.refuse(name, f"'{raw}' has a UTC offset outside -15:59..+15:59.")
            return None
        return value

    @staticmethod
    def _parsed_datetime(raw: str) -> datetime.datetime | None:
        if not raw:
            return None
        try:
            # An unencoded '+' of a UTC offset arrives as a space.
            return parse_datetime(raw) or parse_datetime("+".join(raw.rsplit(" ", 1)))
        except ValueError:
            return None

    def integer(self, name: str, *, default: int, low: int, high: int | None = None) -> int:
        """The value clamped to ``low``..``high`` (at most BIGINT_MAX); ``default`` when absent or refused."""
        raw = self.single(name)
        if raw is None:
            return default
        if not INTEGER.fullmatch(raw):
            self.refuse(name, f"'{raw}' is not an integer.")
            return default
        value = int(raw)
        return max(low, min(BIGINT_MAX if high is None else high, value))

    def raise_if_invalid(self) -> None:
        if self.errors:
            detail = "; ".join(f"{error['field']}: {error['message']}" for error in self.errors)
            raise BadRequest(detail, errors=self.errors)


def requested_version(request: Request) -> int | None:
    """``?version=N`` (a positive integer), or None for the latest; as the agent and group stores read it."""
    raw = request.query_params.get("version")
    if raw in (None, ""):
        return None
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(
            "version must be a positive integer",
            errors=[{"field": "version", "message": "must be a positive integer"}],
        ) from None
    if value < 1:
        raise BadRequest(
            "version must be a positive integer",
            errors=[{"field": "version", "message": "must be a positive integer"}],
        )
    return value
