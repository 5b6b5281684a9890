"""manage.py hitl_user: creates or updates a user with a role and prints its token last."""

from io import StringIO

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db


def hitl_user(*args: str) -> str:
    out = StringIO()
    call_command("hitl_user", *args, stdout=out)
    return out.getvalue()


def last_line(output: str) -> str:
    return output.rstrip("\n").splitlines()[-1]


def group_names(user: User) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def test_prints_the_users_token_alone_on_the_last_line():
    output = hitl_user("alice", "--role", "user", "--password", "alice-pass")

    alice = User.objects.get(username="alice")
    assert last_line(output) == Token.objects.get(user=alice).key
    assert alice.check_password("alice-pass")


def test_admin_role_is_superuser_staff_and_in_the_admin_group():
    hitl_user("root1", "--role", "admin", "--password", "admin-pass", "--email", "root1@example.com")

    admin = User.objects.get(username="root1")
    assert admin.is_superuser and admin.is_staff
    assert group_names(admin) == {settings.HITL_ADMIN_GROUP}
    assert admin.email == "root1@example.com"


def test_approver_role_is_staff_in_the_approver_group_and_not_superuser():
    hitl_user("approver", "--role", "approver")

    approver = User.objects.get(username="approver")
    assert approver.is_staff and not approver.is_superuser
    assert group_names(approver) == {settings.HITL_APPROVER_GROUP}


def test_new_user_without_role_is_a_plain_user_who_can_only_use_the_token():
    hitl_user("bob")

    bob = User.objects.get(username="bob")
    assert not bob.is_staff and not bob.is_superuser
    assert group_names(bob) == set()
    assert not bob.has_usable_password()


def test_rerun_keeps_the_token_and_updates_the_password():
    first = last_line(hitl_user("alice", "--password", "first-pass"))
    second = last_line(hitl_user("alice", "--password", "second-pass"))

    assert first == second
    assert User.objects.get(username="alice").check_password("second-pass")
    assert User.objects.filter(username="alice").count() == 1


def test_demoting_an_admin_to_user_removes_groups_and_staff_flags():
    hitl_user("carol", "--role", "admin")
    hitl_user("carol", "--role", "user")

    carol = User.objects.get(username="carol")
    assert not carol.is_staff and not carol.is_superuser
    assert group_names(carol) == set()


def test_changing_admin_to_approver_swaps_the_group_and_drops_superuser():
    hitl_user("dave", "--role", "admin")
    hitl_user("dave", "--role", "approver")

    dave = User.objects.get(username="dave")
    assert dave.is_staff and not dave.is_superuser
    assert group_names(dave) == {settings.HITL_APPROVER_GROUP}


def test_update_without_role_leaves_the_role_alone():
    hitl_user("erin", "--role", "approver")
    hitl_user("erin", "--password", "new-password")

    erin = User.objects.get(username="erin")
    assert erin.is_staff
    assert group_names(erin) == {settings.HITL_APPROVER_GROUP}


def test_unknown_role_is_refused():
    with pytest.raises(CommandError):
        hitl_user("frank", "--role", "superboss")
    assert not User.objects.filter(username="frank").exists()


def test_too_short_password_is_refused_and_nothing_is_created():
    with pytest.raises(CommandError, match="password rejected"):
        hitl_user("grace", "--password", "short")
    assert not User.objects.filter(username="grace").exists()


def test_invalid_username_is_refused():
    with pytest.raises(CommandError, match="invalid username"):
        hitl_user("no spaces allowed")


def test_agent_role_is_a_service_account_in_the_agent_group_only():
    hitl_user("ops", "--role", "admin")
    output = hitl_user("ops", "--role", "agent")

    account = User.objects.get(username="ops")
    assert not account.is_staff and not account.is_superuser
    assert group_names(account) == {settings.HITL_AGENT_GROUP}
    assert last_line(output) == Token.objects.get(user=account).key
