"""Content negotiation (common/negotiation.py): the plain requests get DRF's answer without DRF's parsing,
and every request gets exactly what DRF's own negotiation would choose or refuse."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.test import RequestFactory
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer, BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request

from approval_requests.status_stream import EventStreamRenderer
from common.negotiation import JsonFirstNegotiation

ACCEPTS = [
    None,
    "*/*",
    "application/json",
    "",
    "application/*",
    "application/json; indent=4",
    "application/json;q=0.9, */*;q=0.1",
    "text/event-stream",
    "text/event-stream, */*",
    "text/html",
    "text/html, application/json",
    "application/problem+json",
    "*/*; charset=utf-8",
]
QUERIES = ["", "wait=10", "format=json", "format=api", "format=event-stream", "f%6Frmat=api", "informat=1"]


class Html(BaseRenderer):
    media_type = "text/html"
    format = "html"


RENDERER_LISTS: list[list[BaseRenderer]] = [
    [JSONRenderer()],
    [JSONRenderer(), EventStreamRenderer()],
    [EventStreamRenderer(), JSONRenderer()],
    [Html(), JSONRenderer()],
    [JSONRenderer(), BrowsableAPIRenderer()],
]


def chosen(negotiation: Any, accept: str | None, query: str, renderers: list[BaseRenderer]) -> Any:
    extra = {} if accept is None else {"HTTP_ACCEPT": accept}
    request = Request(RequestFactory().get(f"/x?{query}" if query else "/x", **extra))
    try:
        renderer, media_type = negotiation.select_renderer(request, renderers)
    except Exception as refused:  # what DRF refuses (406, 404 for an unknown format) must be refused alike
        return type(refused)
    return renderers.index(renderer), media_type


@pytest.mark.parametrize("renderers", RENDERER_LISTS, ids=lambda r: "+".join(x.media_type for x in r))
def test_the_negotiation_chooses_and_refuses_exactly_as_drfs(renderers):
    for accept, query in itertools.product(ACCEPTS, QUERIES):
        ours = chosen(JsonFirstNegotiation(), accept, query, renderers)
        drf = chosen(DefaultContentNegotiation(), accept, query, renderers)
        assert ours == drf, (accept, query)


def test_the_plain_requests_are_answered_without_parsing_the_query_or_the_accept_header(monkeypatch):
    def parsed(*args: Any) -> Any:
        raise AssertionError("DRF's negotiation ran")

    monkeypatch.setattr(DefaultContentNegotiation, "select_renderer", parsed)
    json_first = [JSONRenderer(), EventStreamRenderer()]
    for accept, query in itertools.product([None, "*/*", "application/json"], ["", "wait=10"]):
        assert chosen(JsonFirstNegotiation(), accept, query, json_first) == (0, "application/json")
    assert chosen(JsonFirstNegotiation(), "text/html", "", json_first) is AssertionError


def test_a_view_still_refuses_what_it_cannot_render(client, db):
    assert client.get("/agentstore/agents", HTTP_ACCEPT="text/html").status_code == 406
    assert client.get("/agentstore/agents", HTTP_ACCEPT="*/*").status_code == 401  # past the negotiation
    assert (
        client.get("/agentstore/agents?format=html").status_code == 404
    )  # DRF's answer to an unknown format
