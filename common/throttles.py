"""Request rates per signed-in user: DRF's throttling, two scopes, counts every web process shares.

- ``turns``: the requests that run an agent turn or start a group discussion (start, say, a group
  discussion's start, the MCP talk tools); ``writes``: every other POST, PUT, PATCH and DELETE of the
  REST API and the MCP decision tools. A request counts against one scope, never both; reads never count.
- Only signed-in users are counted, by user id (an anonymous request is refused 401 before any throttle
  runs; Slack's signed webhooks have no user and are not counted).
- The rates are read from the settings on every request (``HITL_THROTTLE_TURNS_RATE``,
  ``HITL_THROTTLE_WRITES_RATE``), so a changed setting applies at once; empty or ``off`` turns a scope off.
- The counts live in the ``throttle`` cache (``HITL_THROTTLE_CACHE_URL``): a table of the database by
  default, so every web process sees the same counts.

Over the rate, REST answers 429 ``THROTTLED`` with ``Retry-After`` (common.problems), MCP an error
with ``details.code`` ``THROTTLED`` (``count_request``). docs/operations.md, "Throttles and caps".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import BaseCache, caches
from rest_framework.permissions import SAFE_METHODS
from rest_framework.throttling import UserRateThrottle

from common.errors import ApplicationError
from common.throttle_rates import OFF, throttle_rate

THROTTLE_CACHE = "throttle"
TURNS, WRITES = "turns", "writes"


class _UserRate(UserRateThrottle):
    """DRF's per-user sliding window over the last ``duration`` seconds, with the rate read from the
    settings per request and the counts in the shared ``throttle`` cache."""

    setting = ""

    @property
    def cache(self) -> BaseCache:  # type: ignore[override]  # DRF reads it as an attribute
        return caches[THROTTLE_CACHE]

    def get_rate(self) -> str | None:
        rate = throttle_rate(getattr(settings, self.setting), setting=self.setting)
        return None if rate == OFF else rate

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        if request.method in SAFE_METHODS or not (request.user and request.user.is_authenticated):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}

    def wait(self) -> float:
        """DRF's advice of when to try again, at least a second and always a number, so a 429 always
        carries ``Retry-After`` (DRF's own answer is None when a lowered rate left a longer history)."""
        waited = super().wait()
        if waited is None:
            waited = self.duration - (self.now - self.history[-1])
        return max(1.0, waited)


class TurnRateThrottle(_UserRate):
    scope = TURNS
    setting = "HITL_THROTTLE_TURNS_RATE"


class WriteRateThrottle(_UserRate):
    scope = WRITES
    setting = "HITL_THROTTLE_WRITES_RATE"


THROTTLES = {TURNS: TurnRateThrottle, WRITES: WriteRateThrottle}


class Throttled(ApplicationError):
    """Over a rate, outside a DRF view (the MCP tools): REST's 429 THROTTLED, with ``retryAfter``."""

    status = 429
    code = "THROTTLED"
    title = "Too many requests"


@dataclass(frozen=True)
class _Caller:
    """What DRF's throttle reads of a request: who sends it and how."""

    user: Any
    method: str = "POST"


def count_request(*, user: Any, scope: str) -> None:
    """Count one request of ``user`` against ``scope`` (``turns`` or ``writes``) exactly as a REST request
    is counted (the same throttle, rate and shared counts); raise ``Throttled`` when it is over the rate."""
    throttle = THROTTLES[scope]()
    if throttle.allow_request(_Caller(user=user), None):
        return
    retry_after = math.ceil(throttle.wait())
    raise Throttled(
        f"Request was throttled: over the {scope} rate of {throttle.rate} per user "
        f"({throttle.setting}); retry in {retry_after} seconds.",
        retryAfter=retry_after,
        setting=throttle.setting,
    )
