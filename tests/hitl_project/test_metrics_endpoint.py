"""GET /metrics: the format scrapers expect, and who may read it (HITL_METRICS_PUBLIC)."""

from __future__ import annotations

import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from rest_framework.test import APIClient

from harnesses.users import client_for

pytestmark = pytest.mark.urls("tests.hitl_project.urls")


def test_public_metrics_need_no_credentials_and_speak_the_prometheus_text_format():
    response = APIClient().get("/metrics", HTTP_ACCEPT="text/plain;version=0.0.4")

    assert response.status_code == 200
    assert response["Content-Type"] == CONTENT_TYPE_LATEST
    assert "# TYPE hitl_operator_gate_verified gauge" in response.content.decode()


def test_public_metrics_ignore_a_bad_token():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")

    assert client.get("/metrics").status_code == 200


@pytest.mark.django_db
def test_private_metrics_refuse_anonymous_callers_with_401(settings):
    settings.HITL_METRICS_PUBLIC = False

    response = APIClient().get("/metrics")

    assert response.status_code == 401
    assert response.json()["code"] == "UNAUTHENTICATED"


@pytest.mark.django_db
def test_private_metrics_refuse_plain_users_with_403(settings, alice):
    settings.HITL_METRICS_PUBLIC = False

    response = client_for(alice).get("/metrics")

    assert response.status_code == 403
    assert response.json()["code"] == "FORBIDDEN"


@pytest.mark.django_db
def test_private_metrics_serve_admins_and_staff(settings, admin_user, approver):
    settings.HITL_METRICS_PUBLIC = False

    assert client_for(admin_user).get("/metrics").status_code == 200
    assert client_for(approver).get("/metrics").status_code == 200  # approvers are staff


@pytest.mark.django_db
def test_private_metrics_serve_a_staff_session(settings, admin_user):
    settings.HITL_METRICS_PUBLIC = False
    client = APIClient()
    client.force_login(admin_user)

    assert client.get("/metrics").status_code == 200
