"""Users of each role (user, approver, admin, agent) with their API tokens, and API clients that use them."""

from __future__ import annotations

from django.contrib.auth.models import Group, User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


def make_user(username: str, role: str = "user") -> User:
    from django.conf import settings

    user = User.objects.create_user(
        username=username, password="pw-" + username, is_staff=role not in ("user", "agent")
    )
    if role == "admin":
        user.groups.add(Group.objects.get_or_create(name=settings.HITL_ADMIN_GROUP)[0])
    elif role == "approver":
        user.groups.add(Group.objects.get_or_create(name=settings.HITL_APPROVER_GROUP)[0])
    elif role == "agent":
        user.groups.add(Group.objects.get_or_create(name=settings.HITL_AGENT_GROUP)[0])
    Token.objects.get_or_create(user=user)
    return user


def client_for(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get(user=user).key}")
    return client
