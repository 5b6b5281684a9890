"""manage.py hitl_user NAME [--role admin|approver|user|agent] [--password PW] [--email E]

Creates or updates a user, gives it a role and prints its API token on the last line of stdout
(only the key), so scripts can take it with `| tail -n1`.
"""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from rest_framework.authtoken.models import Token

ROLES = ("admin", "approver", "user", "agent")


def apply_role(user, role: str) -> None:
    """A role sets exactly which of the three role groups the user is in, and its staff flags.

    admin: the admin group, staff and superuser; approver: the approver group and staff;
    user: no group, not staff, not superuser; agent: a service account (the agent group, not staff, not
    superuser) that files approval requests and never decides.
    """
    admin_group, _ = Group.objects.get_or_create(name=settings.HITL_ADMIN_GROUP)
    approver_group, _ = Group.objects.get_or_create(name=settings.HITL_APPROVER_GROUP)
    agent_group, _ = Group.objects.get_or_create(name=settings.HITL_AGENT_GROUP)
    wanted = {"admin": {admin_group}, "approver": {approver_group}, "user": set(), "agent": {agent_group}}[
        role
    ]
    for group in (admin_group, approver_group, agent_group):
        if group in wanted:
            user.groups.add(group)
        else:
            user.groups.remove(group)
    user.is_staff = role in ("admin", "approver")
    user.is_superuser = role == "admin"


class Command(BaseCommand):
    help = (
        "Create or update a user and print its API token on the last line. "
        "--role defaults to 'user' for a new user and leaves an existing user's role unchanged."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="username")
        parser.add_argument(
            "--role",
            choices=ROLES,
            help="admin, approver, user or agent (a service account for approval requests)",
        )
        parser.add_argument(
            "--password", help="set this password (a new user without one can only use its token)"
        )
        parser.add_argument("--email", help="set this e-mail address")

    def handle(self, *args, name: str, role: str | None, password: str | None, email: str | None, **options):
        User = get_user_model()
        try:
            User.username_validator(name)
        except ValidationError as exc:
            raise CommandError(f"invalid username {name!r}: {' '.join(exc.messages)}") from exc

        with transaction.atomic():
            user = User.objects.select_for_update().filter(username=name).first()
            created = user is None
            if created:
                user = User(username=name)
                user.set_unusable_password()
                role = role or "user"
            if email is not None:
                user.email = email
            if password is not None:
                try:
                    validate_password(password, user)
                except ValidationError as exc:
                    raise CommandError(f"password rejected: {' '.join(exc.messages)}") from exc
                user.set_password(password)
            user.save()
            if role is not None:
                apply_role(user, role)
                user.save(update_fields=["is_staff", "is_superuser"])
            token, _ = Token.objects.get_or_create(user=user)

        described = f" with role {role}" if role else ""
        self.stdout.write(f"{'Created' if created else 'Updated'} user {name}{described}; API token:")
        self.stdout.write(token.key)
