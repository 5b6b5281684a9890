"""System checks of the keys the service cannot do without, and how ``/healthz`` reports them.

Rules:

- A key problem is an **error** under the production settings (``HITL_STRICT_CONFIG``): ``manage.py
  check``, ``migrate`` and ``qcluster`` refuse to start. In development it is a **warning**.
- ``/healthz`` reports a problem as ``error: …`` (503) when the key cannot work at all, or under the
  production settings; otherwise as ``warning: …`` (200).
- A message names the setting and says how to make a key; it never contains a key's value.

This module checks ``HITL_AUDIT_KEY``; ``toolgate/checks.py`` checks the secret store and pinning keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import checks

TAG = "hitl"
MIN_KEY_BYTES = 32
RANDOM_KEY_HINT = 'Make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'


@dataclass(frozen=True)
class KeyProblem:
    number: int  # the check ids are hitl.E<number> and hitl.W<number>
    message: str
    hint: str
    unusable: bool  # nothing that needs the key can work (rather than: it works, but the key is weak)


def strict() -> bool:
    return bool(getattr(settings, "HITL_STRICT_CONFIG", False))


def check_message(problem: KeyProblem) -> checks.CheckMessage:
    if strict():
        return checks.Error(problem.message, hint=problem.hint, id=f"hitl.E{problem.number:03d}")
    return checks.Warning(problem.message, hint=problem.hint, id=f"hitl.W{problem.number:03d}")


def health_text(problem: KeyProblem | None) -> str:
    """``ok``, ``warning: …`` or ``error: …`` for ``/healthz`` (see the module rules)."""
    if problem is None:
        return "ok"
    return f"{'error' if problem.unusable or strict() else 'warning'}: {problem.message}"


def hmac_key_problem(*, setting: str, value: str, empty: int, short: int) -> KeyProblem | None:
    """An HMAC key is at least ``MIN_KEY_BYTES`` bytes of UTF-8: an empty key is no key at all (anyone can
    compute the MAC), a short one can be guessed. ``empty`` and ``short`` are the check numbers."""
    if not value:
        return KeyProblem(
            empty, f"{setting} is empty", f"Set {setting} to a random key. {RANDOM_KEY_HINT}", unusable=True
        )
    try:
        length = len(value.encode("utf-8"))
    except UnicodeEncodeError:  # undecodable bytes in the environment arrive as lone surrogates
        return KeyProblem(short, f"{setting} is not valid UTF-8", RANDOM_KEY_HINT, unusable=True)
    if length < MIN_KEY_BYTES:
        size = f"{length} byte" + ("" if length == 1 else "s")
        return KeyProblem(
            short,
            f"{setting} is {size} long; it needs at least {MIN_KEY_BYTES}",
            f"Use a random key of at least {MIN_KEY_BYTES} bytes. {RANDOM_KEY_HINT}",
            unusable=False,
        )
    return None


def audit_key_problem() -> KeyProblem | None:
    """HITL_AUDIT_KEY keys the HMAC chain of the audit ledger (approvals/audit.py)."""
    return hmac_key_problem(setting="HITL_AUDIT_KEY", value=settings.HITL_AUDIT_KEY, empty=3, short=4)


@checks.register(TAG)
def check_audit_key(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    problem = audit_key_problem()
    return [check_message(problem)] if problem else []
