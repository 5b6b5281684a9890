"""manage.py hitl_rotate_secrets: re-encrypt every stored secret under the newest HITL_SECRETS_KEY."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from toolgate.secret_store import rotate_all


class Command(BaseCommand):
    help = "Re-encrypt every secret under the first (newest) key of HITL_SECRETS_KEY."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"re-encrypted {rotate_all()} secrets under the newest key")
