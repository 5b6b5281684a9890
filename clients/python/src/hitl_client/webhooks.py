"""Receiving the service's webhooks: each verified per the Standard Webhooks specification with the
service account's secret (the ``standardwebhooks`` package: ``pip install hitl-client[webhooks]``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class WebhookReceiver:
    """``receive(body, headers)`` returns the event (``{"type", "timestamp", "data": {"id", "status", …}}``)
    of a delivery signed with ``secret``, and raises for a forged, altered or stale one. A delivery is
    retried with the same ``webhook-id``: ``seen`` (a set of ids the caller keeps) drops duplicates
    (``None`` is returned for one)."""

    def __init__(self, secret: str, seen: set[str] | None = None) -> None:
        from standardwebhooks import Webhook  # an optional extra: only a receiver needs it

        self._webhook = Webhook(secret)
        self._seen = seen

    def receive(self, body: bytes | str, headers: Mapping[str, str]) -> dict[str, Any] | None:
        lowered = {name.lower(): value for name, value in headers.items()}
        event = self._webhook.verify(body, lowered)
        if self._seen is not None:
            delivery = lowered["webhook-id"]
            if delivery in self._seen:
                return None
            self._seen.add(delivery)
        return event
