"""Production settings pass Django's deployment checklist with no warning, and refuse keys that cannot work."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

pytestmark = pytest.mark.long

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def production_env(**overrides: str) -> dict[str, str]:
    """The environment of a process under the production settings with good keys, except for ``overrides``."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hitl_project.settings.production",
        "SECRET_KEY": secrets.token_urlsafe(64),
        "HITL_AUDIT_KEY": secrets.token_urlsafe(32),
        "HITL_SECRETS_KEY": Fernet.generate_key().decode(),
        "ALLOWED_HOSTS": "hitl.example.org",
        **overrides,
    }
    knobs = ("DEBUG", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "HITL_PINNING_KEY")
    for knob in (*knobs, "HITL_HTTP_DENY_PRIVATE", "HITL_HTTP_ALLOW_PRIVATE"):
        if knob not in overrides:
            env.pop(knob, None)  # the production defaults are what is checked
    return env


def check_deploy(**overrides: str) -> subprocess.CompletedProcess:
    """``manage.py check --deploy --fail-level WARNING`` under the production settings with good keys,
    except for ``overrides``."""
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=PROJECT_ROOT,
        env=production_env(**overrides),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_pass_check_deploy_without_warnings():
    result = check_deploy()

    assert result.returncode == 0, f"exit code {result.returncode}\n{result.stdout}\n{result.stderr}"


def test_a_weakened_https_setting_fails_deploy_check():
    """The gate can fail: any warning of Django's checklist (here security.W008) is a failure."""
    result = check_deploy(SECURE_SSL_REDIRECT="false")

    assert result.returncode != 0
    assert "(security.W008)" in result.stderr, result.stderr


def test_invalid_fernet_key_fails_deploy_check():
    good, bad = Fernet.generate_key().decode(), "not-a-fernet-key-0123456789"

    single = check_deploy(HITL_SECRETS_KEY=bad)
    rotation = check_deploy(HITL_SECRETS_KEY=f"{good},{bad}")

    assert single.returncode != 0
    assert "(hitl.E001) HITL_SECRETS_KEY is not a valid Fernet key" in single.stderr, single.stderr
    assert "Fernet.generate_key()" in single.stderr  # says how to make one
    assert rotation.returncode != 0
    assert "(hitl.E001) key 2 of 2 in HITL_SECRETS_KEY is not a valid Fernet key" in rotation.stderr, (
        rotation.stderr
    )
    for result in (single, rotation):
        assert bad not in result.stdout + result.stderr and good not in result.stdout + result.stderr


def test_short_audit_key_fails_deploy_check():
    short = check_deploy(HITL_AUDIT_KEY="k")
    empty = check_deploy(HITL_AUDIT_KEY="")

    assert short.returncode != 0
    assert "(hitl.E004) HITL_AUDIT_KEY is 1 byte long; it needs at least 32" in short.stderr, short.stderr
    assert "secrets.token_urlsafe(32)" in short.stderr
    assert empty.returncode != 0 and "(hitl.E003) HITL_AUDIT_KEY is empty" in empty.stderr, empty.stderr


def test_short_pinning_key_and_empty_secrets_key_fail_deploy_check():
    pinning = check_deploy(HITL_PINNING_KEY="pin-0123456789")
    no_store_key = check_deploy(HITL_SECRETS_KEY="")

    assert pinning.returncode != 0 and "(hitl.E005) HITL_PINNING_KEY is 14 bytes long" in pinning.stderr
    assert "pin-0123456789" not in pinning.stderr
    assert no_store_key.returncode != 0 and "(hitl.E002) HITL_SECRETS_KEY is empty" in no_store_key.stderr


def production_setting(name: str, **overrides: str) -> str:
    """The value of setting ``name`` as the production settings module makes it, printed by a fresh process."""
    shown = subprocess.run(
        [sys.executable, "-c", f"from django.conf import settings; print(repr(settings.{name}))"],
        cwd=PROJECT_ROOT,
        env=production_env(**overrides),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout.strip()


def test_production_settings_deny_private_addresses_unless_the_environment_turns_that_off():
    assert production_setting("HITL_HTTP_DENY_PRIVATE") == "True"
    assert production_setting("HITL_HTTP_DENY_PRIVATE", HITL_HTTP_DENY_PRIVATE="false") == "False"
    assert production_setting("HITL_HTTP_ALLOW_PRIVATE") == "''"


def test_a_bad_egress_allow_list_fails_deploy_check():
    bad = check_deploy(HITL_HTTP_ALLOW_PRIVATE="payments.internal,10.20.0.0/33")
    good = check_deploy(HITL_HTTP_ALLOW_PRIVATE="payments.internal,10.20.0.0/16")

    assert bad.returncode != 0
    assert "(hitl.E006) HITL_HTTP_ALLOW_PRIVATE: '10.20.0.0/33' is not a network" in bad.stderr, bad.stderr
    assert good.returncode == 0, good.stderr


def test_a_web_process_refuses_to_start_with_a_key_that_cannot_work():
    """uvicorn and gunicorn run no system checks: the ASGI and WSGI entry points do, in production."""
    bad = "not-a-fernet-key-0123456789"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hitl_project.settings.production",
        "SECRET_KEY": secrets.token_urlsafe(64),
        "HITL_AUDIT_KEY": secrets.token_urlsafe(32),
        "ALLOWED_HOSTS": "hitl.example.org",
    }
    for module in ("hitl_project.asgi", "hitl_project.wsgi"):
        broken = subprocess.run(
            [sys.executable, "-c", f"import {module}"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, "HITL_SECRETS_KEY": bad},
        )
        good = subprocess.run(
            [sys.executable, "-c", f"import {module}"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, "HITL_SECRETS_KEY": Fernet.generate_key().decode()},
        )
        assert broken.returncode != 0 and "refusing to start: (hitl.E001)" in broken.stderr, broken.stderr
        assert bad not in broken.stderr
        assert good.returncode == 0, good.stderr
