"""Shared fixtures: users of each role and authenticated API clients."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


def make_user(username: str, role: str = "user") -> User:
    from django.conf import settings

    user = User.objects.create_user(username=username, password="pw-" + username, is_staff=role != "user")
    if role == "admin":
        user.groups.add(Group.objects.get_or_create(name=settings.HITL_ADMIN_GROUP)[0])
    elif role == "approver":
        user.groups.add(Group.objects.get_or_create(name=settings.HITL_APPROVER_GROUP)[0])
    Token.objects.get_or_create(user=user)
    return user


def client_for(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get(user=user).key}")
    return client


@pytest.fixture
def admin_user(db) -> User:
    return make_user("admin", "admin")


@pytest.fixture
def approver(db) -> User:
    return make_user("approver", "approver")


@pytest.fixture
def alice(db) -> User:
    return make_user("alice")


@pytest.fixture
def bob(db) -> User:
    return make_user("bob")


@pytest.fixture
def admin_client(admin_user) -> APIClient:
    return client_for(admin_user)


@pytest.fixture
def approver_client(approver) -> APIClient:
    return client_for(approver)


@pytest.fixture
def alice_client(alice) -> APIClient:
    return client_for(alice)


@pytest.fixture
def bob_client(bob) -> APIClient:
    return client_for(bob)


@pytest.fixture
def anon_client() -> APIClient:
    return APIClient()
