"""Test settings: real PostgreSQL (see tests/conftest.py), fast hashing, no q-cluster needed in-process."""

from hitl_project.settings.base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
HITL_AUDIT_KEY = "test-audit-key-of-at-least-32-bytes"  # the system checks refuse shorter keys
LOGGING["root"]["level"] = env.str("LOG_LEVEL", default="WARNING")  # noqa: F405
# Django flushes tables with TRUNCATE between transactional tests; the audit trigger allows that only
# in sessions that ask for it on purpose (UPDATE and DELETE stay refused).
DATABASES["default"].setdefault("OPTIONS", {})["options"] = "-c hitl.audit_truncate=allow"  # noqa: F405
