"""Export a selection of the audit ledger as CSV or JSON Lines, streamed in constant memory.

One record per entry with the columns of the REST API's entry (``GET /audit/entries``), so an export
and the API agree field for field; ``detail`` is JSON text in a CSV cell. Values are written verbatim
(a note starting with ``=`` stays as it is): an export is a copy of the ledger, exact enough to
recompute the chain from.

Every surface (``GET /audit/export``, the admin, ``manage.py hitl_audit_export``) streams through
here. Under ASGI the body must be an async generator (Django buffers a sync iterator whole before
sending it), so ``csv_chunks`` / ``jsonl_chunks`` read ``queryset.aiterator()``; ``*_sync`` are the same
over ``queryset.iterator()`` for WSGI and the management command. Rows are fetched from a
server-side cursor ``EXPORT_CHUNK_SIZE`` at a time and text leaves in pieces of about
``PIECE_CHARS``, so memory does not grow with the selection.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import io
import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from django.utils import timezone

from approvals.models import AuditEntry

EXPORT_CHUNK_SIZE = 2000
PIECE_CHARS = 64 * 1024

# (column as in the API, model field)
_COLUMNS = (
    ("id", "id"),
    ("sequence", "sequence"),
    ("subjectType", "subject_type"),
    ("subjectId", "subject_id"),
    ("conversationId", "conversation_id"),
    ("pauseId", "pause_id"),
    ("epoch", "epoch"),
    ("verb", "verb"),
    ("actor", "actor"),
    ("automated", "automated"),
    ("verdict", "verdict"),
    ("note", "note"),
    ("detail", "detail"),
    ("createdAt", "created_at"),
    ("prevHash", "prev_hash"),
    ("entryHash", "entry_hash"),
)
EXPORT_COLUMNS = tuple(column for column, _ in _COLUMNS)
_FIELDS = tuple(field for _, field in _COLUMNS)

FORMATS = ("csv", "jsonl")
CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/jsonl; charset=utf-8"}


def export_rows(queryset: QuerySet[AuditEntry]) -> QuerySet[AuditEntry, dict[str, Any]]:
    """The selection as plain rows of the exported fields, in the order given (oldest first if none)."""
    if not queryset.query.order_by:
        queryset = queryset.order_by("created_at", "id")
    return queryset.values(*_FIELDS)


def export_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """One row as the API shows an entry: camelCase keys, UUIDs and times as text, no verdict is null."""
    return {
        "id": row["id"],
        "sequence": row["sequence"],
        "subjectType": row["subject_type"],
        "subjectId": str(row["subject_id"]),
        "conversationId": _text_or_none(row["conversation_id"]),
        "pauseId": _text_or_none(row["pause_id"]),
        "epoch": _text_or_none(row["epoch"]),
        "verb": row["verb"],
        "actor": row["actor"],
        "automated": row["automated"],
        "verdict": row["verdict"] or None,
        "note": row["note"],
        "detail": row["detail"],
        "createdAt": _api_time(row["created_at"]),
        "prevHash": row["prev_hash"],
        "entryHash": row["entry_hash"],
    }


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _api_time(value: datetime.datetime) -> str:
    # As DRF's DateTimeField renders it with TIME_ZONE = "UTC": ISO-8601, "Z" for UTC.
    text = value.astimezone(datetime.UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def jsonl_line(row: Mapping[str, Any]) -> str:
    return _json(export_record(row)) + "\n"


class _CsvLines:
    """Formats rows as CSV lines (RFC 4180: quoted where needed, CRLF endings); empty cell for null."""

    def __init__(self) -> None:
        self._buffer = io.StringIO()
        self._writer = csv.writer(self._buffer)

    def header(self) -> str:
        return self._line(EXPORT_COLUMNS)

    def __call__(self, row: Mapping[str, Any]) -> str:
        record = export_record(row)
        record["automated"] = "true" if record["automated"] else "false"
        record["detail"] = _json(record["detail"])
        return self._line(["" if record[column] is None else record[column] for column in EXPORT_COLUMNS])

    def _line(self, cells: Iterable[Any]) -> str:
        self._writer.writerow(cells)
        line = self._buffer.getvalue()
        self._buffer.seek(0)
        self._buffer.truncate()
        return line


# --- async (ASGI) -----------------------------------------------------------------------------------


async def csv_chunks(rows: QuerySet[AuditEntry, dict[str, Any]]) -> AsyncIterator[str]:
    """The CSV export of ``rows`` (from ``export_rows``), header first, in pieces of about 64 KiB."""
    lines = _CsvLines()
    async for piece in _pieces(rows, lines, first=lines.header()):
        yield piece


async def jsonl_chunks(rows: QuerySet[AuditEntry, dict[str, Any]]) -> AsyncIterator[str]:
    """The JSON Lines export of ``rows`` (from ``export_rows``): one entry object per line."""
    async for piece in _pieces(rows, jsonl_line):
        yield piece


async def _pieces(
    rows: QuerySet[AuditEntry, dict[str, Any]], line: Callable[[Mapping[str, Any]], str], first: str = ""
) -> AsyncIterator[str]:
    pieces = _Pieces(first)
    async with _one_transaction():
        async for row in rows.aiterator(chunk_size=EXPORT_CHUNK_SIZE):
            if (piece := pieces.add(line(row))) is not None:
                yield piece
    if (piece := pieces.rest()) is not None:
        yield piece


@contextlib.asynccontextmanager
async def _one_transaction() -> AsyncIterator[None]:
    """``transaction.atomic()`` around async ORM calls.

    Outside a transaction Django declares the server-side cursor WITH HOLD, and PostgreSQL then copies
    the whole result aside before the first row (for 1,000,000 entries: seconds before the first
    byte, and a temporary file the size of the export). Inside one the cursor streams. The ORM's
    thread-sensitive calls all run on one thread per request, the thread that holds the transaction.
    """
    atomic = transaction.atomic()
    await sync_to_async(atomic.__enter__)()
    try:
        yield
    except BaseException as error:  # an error, or the client went away (GeneratorExit, CancelledError)
        await sync_to_async(atomic.__exit__)(type(error), error, error.__traceback__)
        raise
    else:
        await sync_to_async(atomic.__exit__)(None, None, None)


# --- sync (WSGI, management command) ------------------------------------------------------------------


def csv_chunks_sync(rows: QuerySet[AuditEntry, dict[str, Any]]) -> Iterator[str]:
    lines = _CsvLines()
    yield from _pieces_sync(rows, lines, first=lines.header())


def jsonl_chunks_sync(rows: QuerySet[AuditEntry, dict[str, Any]]) -> Iterator[str]:
    yield from _pieces_sync(rows, jsonl_line)


def _pieces_sync(
    rows: QuerySet[AuditEntry, dict[str, Any]], line: Callable[[Mapping[str, Any]], str], first: str = ""
) -> Iterator[str]:
    pieces = _Pieces(first)
    with transaction.atomic():  # see _one_transaction
        for row in rows.iterator(chunk_size=EXPORT_CHUNK_SIZE):
            if (piece := pieces.add(line(row))) is not None:
                yield piece
    if (piece := pieces.rest()) is not None:
        yield piece


class _Pieces:
    """Lines gathered into pieces of at least PIECE_CHARS, the one rule of both exports (async, sync)."""

    def __init__(self, first: str) -> None:
        self.parts, self.size = [first], len(first)

    def add(self, text: str) -> str | None:
        """The piece to send once it holds PIECE_CHARS, else None."""
        self.parts.append(text)
        self.size += len(text)
        if self.size < PIECE_CHARS:
            return None
        piece = "".join(self.parts)
        self.parts, self.size = [], 0
        return piece

    def rest(self) -> str | None:
        """What is left after the last row, None when nothing is."""
        return "".join(self.parts) if self.size else None


CHUNKS = {"csv": csv_chunks, "jsonl": jsonl_chunks}
CHUNKS_SYNC = {"csv": csv_chunks_sync, "jsonl": jsonl_chunks_sync}


def export_filename(export_format: str, *, now: datetime.datetime | None = None) -> str:
    stamp = (now or timezone.now()).astimezone(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"audit-entries-{stamp}.{export_format}"


def export_response(
    request: HttpRequest, queryset: QuerySet[AuditEntry], export_format: str
) -> StreamingHttpResponse:
    """A streamed attachment of the selection: an async generator under ASGI, a sync one under WSGI.

    Django serves an async iterator under WSGI (and a sync one under ASGI) only by collecting it into
    a list first, so the generator must match the server.
    """
    rows = export_rows(queryset)
    if _served_by_asgi(request):
        content: Any = CHUNKS[export_format](rows)
    else:
        content = CHUNKS_SYNC[export_format](rows)
    response = StreamingHttpResponse(content, content_type=CONTENT_TYPES[export_format])
    response["Content-Disposition"] = f'attachment; filename="{export_filename(export_format)}"'
    response["Cache-Control"] = "no-store"
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _served_by_asgi(request: HttpRequest) -> bool:
    from django.core.handlers.asgi import ASGIRequest

    django_request = getattr(request, "_request", request)  # a DRF Request wraps Django's
    return isinstance(django_request, ASGIRequest)
