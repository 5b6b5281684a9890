"""manage.py hitl_recover: run crash recovery (and, with --retention, the retention sweep) now."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

from approvals.recovery import run_recovery, run_retention


class Command(BaseCommand):
    help = "Re-arm missing timers, restore dead continuations, interrupt abandoned turns."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--retention", action="store_true", help="also cancel pauses older than HITL_PENDING_MAX_AGE"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        report = run_recovery()
        if options["retention"]:
            report["retentionCancelled"] = run_retention()
        self.stdout.write(json.dumps(report, sort_keys=True))
