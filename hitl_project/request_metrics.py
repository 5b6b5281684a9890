"""Count and time every request by its URL pattern, so ids in paths never become new time series.

Sync and async capable: under uvicorn (ASGI) it stays on the event loop instead of costing every
request a hop to a thread, and the test client and WSGI get the sync path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase

from approvals.metrics import record_http_request

UNMATCHED = "unmatched"


def route_of(request: HttpRequest) -> str:
    """The resolved pattern ("agents/<uuid:conversation_id>/resume"); "unmatched" when nothing resolved."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return UNMATCHED
    return match.route or "/"


class RequestMetricsMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        started = time.perf_counter()
        status = 500  # unless a response comes back: an exception escaped the inner handlers
        try:
            response: HttpResponseBase = self.get_response(request)
            status = response.status_code
            return response
        finally:
            self._record(request, status, started)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        status = 500
        try:
            response: HttpResponseBase = await self.get_response(request)
            status = response.status_code
            return response
        finally:
            self._record(request, status, started)

    @staticmethod
    def _record(request: HttpRequest, status: int, started: float) -> None:
        record_http_request(
            method=request.method or "",
            route=route_of(request),
            status=status,
            duration_seconds=time.perf_counter() - started,
        )
