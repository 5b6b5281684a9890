"""The secret store behind ``${vault:NAME}`` references.

Values are encrypted at rest with Fernet (``cryptography``). ``HITL_SECRETS_KEY`` holds one or more
Fernet keys separated by commas, newest first: every key decrypts, the newest encrypts, and
``manage.py hitl_rotate_secrets`` re-encrypts everything under the newest key. A value is never returned
by any endpoint, admin page, log line, audit entry, export or error message: errors name the reference.
A key that is not a Fernet key makes the store unavailable (503, named by its position in the list, never
by value); the system checks (toolgate/checks.py) and ``/healthz`` report the same problem.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import TYPE_CHECKING

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import Manager

from common.body_rules import refuse_bad_body
from common.errors import ApplicationError, BadRequest, NotFound

if TYPE_CHECKING:
    from toolgate.models import StoredSecret

NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,128}")
VALUE_MAX_BYTES = 65_536


class UnknownSecret(LookupError):
    pass


class SecretStoreUnavailable(ApplicationError):
    """The configured keys cannot encrypt or decrypt anything: the server's problem, never the caller's."""

    status = 503
    code = "INTERNAL"
    title = "Secret store unavailable"

    def __init__(self, problem: str) -> None:
        super().__init__(
            f"The secret store is unavailable: {problem}. Nothing was read or stored; "
            "an operator must fix the key (see docs/secrets.md)."
        )
        self.problem = problem


def configured_keys() -> list[str]:
    """The keys of HITL_SECRETS_KEY, newest first; empty when none is set."""
    return [k.strip() for k in (getattr(settings, "HITL_SECRETS_KEY", "") or "").split(",") if k.strip()]


def _keys() -> list[str | bytes]:
    configured: list[str | bytes] = list(configured_keys())
    if configured:
        return configured
    # Development fallback: derived from SECRET_KEY (production settings require HITL_SECRETS_KEY).
    digest = hashlib.sha256(("hitl-secret-store:" + settings.SECRET_KEY).encode("utf-8")).digest()
    return [base64.urlsafe_b64encode(digest)]


def _cipher() -> MultiFernet:
    """Every key of HITL_SECRETS_KEY must be a Fernet key (32 bytes, urlsafe base64): one that is not makes
    the whole store unavailable rather than silently dropping it, because an old key left out of the list
    leaves every secret it encrypted unreadable."""
    keys = _keys()
    fernets = []
    for position, key in enumerate(keys, start=1):
        try:
            fernets.append(Fernet(key))
        except (ValueError, TypeError):
            which = (
                "HITL_SECRETS_KEY" if len(keys) == 1 else f"key {position} of {len(keys)} in HITL_SECRETS_KEY"
            )
            raise SecretStoreUnavailable(f"{which} is not a valid Fernet key") from None
    return MultiFernet(fernets)


def key_problem() -> str | None:
    """Why the secret store cannot work with the configured keys (see ``_cipher``), or None; cheap."""
    try:
        _cipher()
    except SecretStoreUnavailable as unavailable:
        return unavailable.problem
    return None


def validate_name(name: object) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise BadRequest(
            "secret names are 1 to 128 characters of A-Z a-z 0-9 _ . -",
            errors=[{"field": "name", "message": "1-128 characters of [A-Za-z0-9_.-]"}],
        )
    return name


def validate_value(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise BadRequest(
            "value must be a non-empty string", errors=[{"field": "value", "message": "required"}]
        )
    refuse_bad_body(value, field="value")  # encrypted at rest, but sent in URLs, headers, bodies
    if len(value.encode("utf-8")) > VALUE_MAX_BYTES:
        raise BadRequest(
            "value is too large", errors=[{"field": "value", "message": f"over {VALUE_MAX_BYTES} bytes"}]
        )
    return value


def _stored_secrets() -> Manager[StoredSecret]:
    # Looked up on use, not imported: this module is on the import path of the logging filter
    # (toolgate.outbound.log_redaction), which Django sets up before its app registry.
    return apps.get_model("toolgate", "StoredSecret").objects


def set_secret(*, name: str, value: str) -> StoredSecret:
    name, value = validate_name(name), validate_value(value)
    token = _cipher().encrypt(value.encode("utf-8")).decode("ascii")
    with transaction.atomic():
        secret, _ = _stored_secrets().update_or_create(name=name, defaults={"ciphertext": token})
    return secret


def delete_secret(*, name: str) -> None:
    deleted, _ = _stored_secrets().filter(name=validate_name(name)).delete()
    if not deleted:
        raise NotFound(f"No secret named '{name}'.")


def secret_value(name: str) -> str:
    """The decrypted value; UnknownSecret when there is none (callers name the reference, not a value)."""
    row = _stored_secrets().filter(name=name).values_list("ciphertext", flat=True).first()
    if row is None:
        raise UnknownSecret(name)
    try:
        return _cipher().decrypt(row.encode("ascii")).decode("utf-8")
    except InvalidToken:
        raise UnknownSecret(name) from None


def rotate_all() -> int:
    """Re-encrypt every secret under the newest key; returns how many."""
    cipher = _cipher()
    rotated = 0
    with transaction.atomic():
        for secret in _stored_secrets().select_for_update().order_by("name"):
            try:
                secret.ciphertext = cipher.rotate(secret.ciphertext.encode("ascii")).decode("ascii")
            except InvalidToken:
                raise ImproperlyConfigured(
                    f"secret '{secret.name}' cannot be decrypted with any key of HITL_SECRETS_KEY: nothing was rotated"
                ) from None
            secret.save(update_fields=["ciphertext"])
            rotated += 1
    return rotated
