"""The acting identity of a decision, derived in one place and never read from a request body."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SYSTEM_PREFIX = "system:"


@dataclass(frozen=True)
class Actor:
    """``user``: the account that decides; ``via``: for an actor with none of its own (a Slack user), the
    account whose access it decides with (the integration's), which routing checks it by."""

    name: str
    user: Any = None
    via: Any = None

    @property
    def automated(self) -> bool:
        """Only system actors are automated; mcp: and slack: actors are humans."""
        return self.name.startswith(SYSTEM_PREFIX)

    @property
    def user_id(self) -> int | None:
        return getattr(self.user, "pk", None)


def actor_for_user(user: Any) -> Actor:
    if not user or not user.is_authenticated:
        raise ValueError("an anonymous caller cannot act")
    return Actor(name=user.get_username(), user=user)


def system_actor(what: str) -> Actor:
    return Actor(name=f"{SYSTEM_PREFIX}{what}")
