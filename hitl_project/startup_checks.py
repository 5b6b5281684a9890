"""A web process under the production settings refuses to start with a key that cannot work.

``manage.py check``, ``migrate`` and ``qcluster`` run Django's system checks; uvicorn and gunicorn do
not. So the ASGI and WSGI entry points run the ``hitl`` checks themselves when ``HITL_STRICT_CONFIG``
is on (production) and raise ImproperlyConfigured naming each failed check, never a key's value.
"""

from __future__ import annotations

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured


def refuse_to_start_on_key_errors() -> None:
    if not getattr(settings, "HITL_STRICT_CONFIG", False):
        return
    errors = [message for message in checks.run_checks(tags=["hitl"]) if message.level >= checks.ERROR]
    if errors:
        listed = "; ".join(f"({message.id}) {message.msg}" for message in errors)
        raise ImproperlyConfigured(f"refusing to start: {listed}")
