"""manage.py hitl_audit_export: write a filtered selection of the audit ledger as CSV or JSON Lines."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.audit_export import CHUNKS_SYNC, FORMATS, export_rows
from approvals.audit_filters import filtered_audit_entries
from common.errors import BadRequest
from common.query_params import QueryParams

FILTERS = ("conversation", "pause", "actor", "verb", "since", "until")


class Command(BaseCommand):
    help = (
        "Export audit entries (oldest first) as CSV or JSON Lines, with the columns and filters of "
        "GET /audit/export, to stdout or a file. Streams: memory does not grow with the ledger."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", choices=FORMATS, default="csv", help="csv (default) or jsonl.")
        parser.add_argument("--output", "-o", metavar="FILE", help="Write here instead of stdout.")
        parser.add_argument("--conversation", help="Entries about this conversation (or subject id).")
        parser.add_argument("--pause", help="Entries of this pause.")
        parser.add_argument("--actor", help="Exact actor, e.g. alice or system:timeout.")
        parser.add_argument("--verb", help="Exact verb, e.g. hitl.approval.")
        parser.add_argument("--since", help="Created at or after (ISO-8601).")
        parser.add_argument("--until", help="Created before (ISO-8601).")

    def handle(self, *args: Any, **options: Any) -> None:
        query = QueryParams({name: options[name] for name in FILTERS if options[name]})
        entries = filtered_audit_entries(query)
        try:
            query.raise_if_invalid()
        except BadRequest as error:
            raise CommandError(error.detail) from error
        chunks = CHUNKS_SYNC[options["format"]](export_rows(entries))
        if not options["output"]:
            for chunk in chunks:
                self.stdout.write(chunk, ending="")
            return
        with open(options["output"], "w", encoding="utf-8", newline="") as output:
            for chunk in chunks:
                output.write(chunk)
