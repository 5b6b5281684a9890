"""Reads of tool gating's stores for its adapters (what a reviewer sees of a tool pause is
``toolgate.gate.pause_details``)."""

from __future__ import annotations

from toolgate.models import StoredSecret


def secret_list() -> list[StoredSecret]:
    """The stored secrets by name, with only their names and update times loaded: never a value."""
    return list(StoredSecret.objects.order_by("name").only("name", "updated_at"))
