"""DRF's content negotiation, with the answer for what nearly every client sends worked out once.

DRF's ``DefaultContentNegotiation`` parses the request's query string (for its ``?format=`` override)
and its ``Accept`` header on every request, and matches each media type against each renderer: a
large part of what DRF itself costs a request. Almost every client sends no ``Accept``, ``*/*`` (httpx,
requests, curl) or ``application/json``, and no ``format`` parameter; for those, when the view's first
renderer is JSON, DRF's answer is always that renderer and ``application/json``. ``JsonFirstNegotiation``
gives that answer without the parsing and leaves every other request to DRF, so what is chosen, and
what is refused (406, or 404 for an unknown ``format``), is DRF's own.
"""

from __future__ import annotations

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

JSON = "application/json"
# The Accept headers whose answer is the first renderer when that renderer is JSON (no Accept is */*).
PLAIN_ACCEPTS = frozenset({None, "*/*", JSON})


class JsonFirstNegotiation(DefaultContentNegotiation):
    def select_renderer(
        self, request: Request, renderers: list[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        if format_suffix is None and renderers and renderers[0].media_type == JSON:
            meta = request.META
            query = meta.get("QUERY_STRING", "")
            override = self.settings.URL_FORMAT_OVERRIDE
            # a "format" parameter may be spelt with %-escapes: any % leaves the choice to DRF
            if meta.get("HTTP_ACCEPT") in PLAIN_ACCEPTS and not (
                "%" in query or (override and override in query)
            ):
                return renderers[0], JSON
        return super().select_renderer(request, renderers, format_suffix)
