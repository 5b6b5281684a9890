"""manage.py hitl_rotate_secrets: re-encrypt every stored secret under the newest HITL_SECRETS_KEY."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from toolgate.outbound.secret_store import SecretStoreUnavailable, rotate_all


class Command(BaseCommand):
    help = "Re-encrypt every secret under the first (newest) key of HITL_SECRETS_KEY."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            rotated = rotate_all()
        except SecretStoreUnavailable as unavailable:
            raise CommandError(f"{unavailable.problem}: nothing was rotated") from None
        self.stdout.write(f"re-encrypted {rotated} secrets under the newest key")
