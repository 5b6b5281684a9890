"""Entries of a discussion's transcript that are the discussion's own (no member spoke them)."""

from __future__ import annotations

from typing import Any

ERROR = "ERROR"


def own_error(phase: dict[str, Any] | None, note: str) -> dict[str, Any]:
    """An ERROR entry of the discussion itself (``member`` null) in ``phase`` (None: no phase known):
    why it failed, stopped, or could not resume."""
    return {
        "phase": (phase or {}).get("name", ""),
        "phaseType": (phase or {}).get("type", ""),
        "member": None,
        "role": None,
        "content": "",
        "status": ERROR,
        "note": note,
    }
