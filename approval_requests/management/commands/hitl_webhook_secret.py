"""manage.py hitl_webhook_secret NAME

Makes (or replaces) the webhook signing secret of the service account NAME (role agent) and prints it on
the last line of stdout (only the secret, ``whsec_…``), so scripts can take it with ``| tail -n1``. It is
shown this once; the webhooks of NAME's approval requests are signed with it from now on, retries of
earlier events included. The same as ``POST /approval-requests/webhook-secret`` made by the account.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from approval_requests.webhooks import rotate_secret
from approvals.access import is_service_account


class Command(BaseCommand):
    help = (
        "Make (or replace) a service account's webhook signing secret and print it on the last line "
        "(shown this once)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the username of a service account (role agent)")

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        account = get_user_model().objects.filter(username=name).first()
        if account is None:
            raise CommandError(f"no user {name!r}")
        if not account.is_active:
            raise CommandError(f"user {name!r} is not active")
        if not is_service_account(account):
            raise CommandError(
                f"user {name!r} is not a service account (role agent): only service accounts have a webhook "
                f"signing secret (manage.py hitl_user {name} --role agent makes it one)"
            )
        secret = rotate_secret(account)
        self.stdout.write(f"Webhook signing secret of {name} (shown this once; it replaces any earlier one):")
        self.stdout.write(secret)
