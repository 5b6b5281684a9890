"""Production settings pass Django's deployment checklist with no warning."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def test_production_settings_pass_check_deploy_without_warnings():
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hitl_project.settings.production",
        "SECRET_KEY": secrets.token_urlsafe(64),
        "HITL_AUDIT_KEY": secrets.token_urlsafe(32),
        "HITL_SECRETS_KEY": Fernet.generate_key().decode(),
        "ALLOWED_HOSTS": "hitl.example.org",
    }
    for knob in ("DEBUG", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS"):
        env.pop(knob, None)  # the production defaults are what is checked

    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )

    assert result.returncode == 0, f"exit code {result.returncode}\n{result.stdout}\n{result.stderr}"
