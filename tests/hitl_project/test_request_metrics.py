"""Requests are counted and timed by URL pattern, never by the raw path with its ids."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client

from tests.hitl_project.scrape import moved, scrape

pytestmark = pytest.mark.urls("tests.hitl_project.urls")

MIDDLEWARE = "hitl_project.request_metrics.RequestMetricsMiddleware"
THING_ROUTE = "things/<int:thing_id>"


@pytest.fixture(autouse=True)
def request_metrics_on(settings):
    if MIDDLEWARE not in settings.MIDDLEWARE:
        settings.MIDDLEWARE = [*settings.MIDDLEWARE, MIDDLEWARE]


def labels(**pairs: str) -> frozenset[tuple[str, str]]:
    return frozenset(pairs.items())


def requests_between(before, after) -> dict:
    """Requests counted between two scrapes, leaving out the scrape that took `before`."""
    changes = moved(before, after, prefix="http_requests_total")
    return {key: delta for key, delta in changes.items() if ("route", "metrics") not in key[1]}


def test_requests_are_labelled_by_route_pattern_not_by_id():
    before = scrape()
    client = Client()
    assert client.get("/things/42").status_code == 200
    assert client.get("/things/43").status_code == 200
    after = scrape()

    changes = moved(before, after, prefix="http_request")
    assert changes[("http_requests_total", labels(method="GET", route=THING_ROUTE, status="200"))] == 2.0
    assert changes[("http_request_duration_seconds_count", labels(method="GET", route=THING_ROUTE))] == 2.0
    assert not [key for key in after if any("42" in v or "43" in v for n, v in key[1] if n == "route")]


def test_async_requests_are_labelled_by_route_pattern_not_by_id():
    before = scrape()
    response = async_to_sync(AsyncClient().get)("/things/7")
    after = scrape()

    assert response.status_code == 200
    changes = requests_between(before, after)
    assert changes == {("http_requests_total", labels(method="GET", route=THING_ROUTE, status="200")): 1.0}


def test_paths_that_resolve_to_nothing_are_labelled_unmatched():
    before = scrape()
    assert Client().get("/no/such/thing/123").status_code == 404
    after = scrape()

    changes = requests_between(before, after)
    assert changes == {("http_requests_total", labels(method="GET", route="unmatched", status="404")): 1.0}


def test_made_up_methods_share_one_label():
    before = scrape()
    Client().generic("BREW", "/things/1")
    after = scrape()

    changes = requests_between(before, after)
    assert [dict(key[1])["method"] for key in changes] == ["other"]
