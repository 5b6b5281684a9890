"""Test settings: real PostgreSQL (see tests/conftest.py), fast hashing, no q-cluster needed in-process."""

from common.throttle_rates import throttle_rate
from hitl_project.settings.base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
HITL_AUDIT_KEY = "test-audit-key-of-at-least-32-bytes"  # the system checks refuse shorter keys
LOGGING["root"]["level"] = env.str("LOG_LEVEL", default="WARNING")  # noqa: F405
# Django flushes tables with TRUNCATE between transactional tests; the audit trigger allows that only
# in sessions that ask for it on purpose (UPDATE and DELETE stay refused).
DATABASES["default"].setdefault("OPTIONS", {})["options"] = "-c hitl.audit_truncate=allow"  # noqa: F405
# No throttle in the suite (many tests write quickly as one user); the tests of throttling turn them on.
HITL_THROTTLE_TURNS_RATE = throttle_rate(env.str("HITL_THROTTLE_TURNS_RATE", default="off"))  # noqa: F405
HITL_THROTTLE_WRITES_RATE = throttle_rate(env.str("HITL_THROTTLE_WRITES_RATE", default="off"))  # noqa: F405
