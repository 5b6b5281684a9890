"""Keys that cannot work are reported at start (system checks) and by /healthz, never as a 500 later."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core import checks

from approvals.checks import TAG
from tests.conftest import CANARY_SECRET_NAME
from toolgate.models import StoredSecret
from toolgate.outbound.http_requests import SecretReferenceError, resolve_secret_references

PROJECT_ROOT = Path(__file__).resolve().parent.parent
BAD_FERNET = "not-a-fernet-key-0123456789"


def key_checks() -> list[checks.CheckMessage]:
    return checks.run_checks(tags=[TAG])


def test_key_problems_are_warnings_in_development(settings):
    good = Fernet.generate_key().decode()
    settings.HITL_SECRETS_KEY = f"{good},{BAD_FERNET}"
    settings.HITL_AUDIT_KEY = "short-audit-key"
    settings.HITL_PINNING_KEY = "short-pinning-key"

    messages = key_checks()

    assert {m.id for m in messages} == {"hitl.W001", "hitl.W004", "hitl.W005"}
    assert all(m.level == checks.WARNING for m in messages)
    text = " ".join(f"{m.msg} {m.hint}" for m in messages)
    assert (
        "key 2 of 2 in HITL_SECRETS_KEY" in text and "HITL_AUDIT_KEY" in text and "HITL_PINNING_KEY" in text
    )
    for value in (good, BAD_FERNET, "short-audit-key", "short-pinning-key"):
        assert value not in text


def test_the_same_problems_are_errors_under_production_settings(settings):
    settings.HITL_STRICT_CONFIG = True
    settings.HITL_SECRETS_KEY = BAD_FERNET
    settings.HITL_AUDIT_KEY = ""

    assert {(m.id, m.level) for m in key_checks()} == {
        ("hitl.E001", checks.ERROR),
        ("hitl.E003", checks.ERROR),
    }


def test_the_test_settings_pass_the_key_checks():
    assert key_checks() == []


def test_the_development_defaults_of_scripts_start_pass_every_check():
    """./scripts/start runs the base settings with nothing but DATABASE_URL set."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("HITL_") and k not in ("SECRET_KEY", "DJANGO_SETTINGS_MODULE")
    }
    env["DJANGO_SETTINGS_MODULE"] = "hitl_project.settings.base"
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--fail-level", "WARNING"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert "hitl." not in result.stdout + result.stderr


@pytest.mark.django_db
def test_healthz_reports_broken_secret_store(anon_client, settings):
    settings.HITL_SECRETS_KEY = BAD_FERNET

    response = anon_client.get("/healthz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "degraded",
        "database": "postgresql",
        "checks": {
            "database": "ok",
            "secretStore": "error: HITL_SECRETS_KEY is not a valid Fernet key",
            "auditKey": "ok",
            "pinningKey": "ok",
        },
    }
    assert BAD_FERNET not in response.content.decode()


@pytest.mark.django_db
def test_healthz_reports_an_unusable_audit_key_and_only_warns_of_a_short_one_in_development(
    anon_client, settings
):
    settings.HITL_AUDIT_KEY = ""
    empty = anon_client.get("/healthz")
    settings.HITL_AUDIT_KEY = "short-audit-key"
    short = anon_client.get("/healthz")
    settings.HITL_STRICT_CONFIG = True
    short_in_production = anon_client.get("/healthz")

    assert empty.status_code == 503 and empty.json()["status"] == "degraded"
    assert empty.json()["checks"]["auditKey"] == "error: HITL_AUDIT_KEY is empty"
    assert short.status_code == 200 and short.json()["status"] == "ok"
    assert (
        short.json()["checks"]["auditKey"] == "warning: HITL_AUDIT_KEY is 15 bytes long; it needs at least 32"
    )
    assert short_in_production.status_code == 503
    assert short_in_production.json()["checks"]["auditKey"].startswith(
        "error: HITL_AUDIT_KEY is 15 bytes long"
    )


@pytest.mark.django_db
def test_healthz_is_ok_with_good_keys(anon_client):
    response = anon_client.get("/healthz")

    assert response.status_code == 200
    assert response.json()["checks"] == {
        "database": "ok",
        "secretStore": "ok",
        "auditKey": "ok",
        "pinningKey": "ok",
    }


@pytest.mark.django_db
def test_a_secret_put_with_a_broken_key_store_is_a_clear_503_and_stores_nothing(
    admin_client, settings, caplog
):
    settings.HITL_SECRETS_KEY = BAD_FERNET

    with caplog.at_level(logging.ERROR):
        response = admin_client.put("/secretstore/secrets/payments.key", {"value": "v"}, format="json")

    assert response.status_code == 503
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "INTERNAL" and problem["title"] == "Secret store unavailable"
    assert (
        "HITL_SECRETS_KEY is not a valid Fernet key" in problem["detail"]
        and BAD_FERNET not in problem["detail"]
    )
    assert not StoredSecret.objects.exclude(name=CANARY_SECRET_NAME).exists()
    assert not [
        r for r in caplog.records if r.exc_info or r.getMessage() == "unhandled error"
    ]  # no traceback


@pytest.mark.django_db
def test_a_vault_reference_with_a_broken_key_store_fails_the_call_naming_the_reference(settings):
    settings.HITL_SECRETS_KEY = BAD_FERNET

    with pytest.raises(SecretReferenceError) as raised:
        resolve_secret_references(f"${{vault:{CANARY_SECRET_NAME}}}", caller_token=None, allow_caller=False)

    assert str(raised.value) == (
        f"secret store unavailable (HITL_SECRETS_KEY is not a valid Fernet key): "
        f"${{vault:{CANARY_SECRET_NAME}}}"
    )
