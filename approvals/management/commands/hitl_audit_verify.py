"""manage.py hitl_audit_verify: check the audit ledger's hash chains; exit 1 when one was tampered with."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.audit import verify_ledger
from approvals.models import SubjectType


class Command(BaseCommand):
    help = (
        "Verify the HMAC chains of the audit ledger (every subject, or one). Prints what was checked and "
        "every problem found; exits 0 when the ledger is intact and 1 when a problem is found."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--subject-id", type=uuid.UUID, help="Check only this subject's chain.")
        parser.add_argument(
            "--subject-type", choices=SubjectType.values, help="Check only subjects of this type."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        report = verify_ledger(subject_type=options["subject_type"], subject_id=options["subject_id"])
        self.stdout.write(
            f"Checked {report.entries_checked} audit entries in {report.subjects_checked} subjects."
        )
        for problem in report.problems:
            self.stdout.write(self.style.ERROR(f"PROBLEM {problem}"))
        if report.problems:
            raise CommandError(f"audit ledger verification failed: {len(report.problems)} problem(s) found")
        self.stdout.write(self.style.SUCCESS("Audit ledger intact."))
