"""Every REST body passes one door (common.parsers): text PostgreSQL cannot store, numbers it cannot
store and JSON nested too deep are a 400 naming the field, whatever the endpoint, before anything is written."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from django_q.models import Schedule

from common.errors import BadRequest
from toolgate.models import StoredSecret
from toolgate.outbound.secret_store import set_secret

pytestmark = pytest.mark.django_db

ENDPOINTS = [
    ("post", "/auth/token", '{{"username": "al{bad}ice", "password": "pw"}}', "username"),
    ("put", "/secretstore/secrets/payments.key", '{{"value": "s3cr{bad}t"}}', "value"),
    ("post", "/schedulestore/schedules", '{{"func": "math.floor", "name": "n{bad}"}}', "name"),
    ("post", "/administration/operator/canary-result", '{{"outcome": "pass", "note": ["{bad}"]}}', "note[0]"),
    ("post", "/agentstore/agents", '{{"name": "{bad}", "workflows": []}}', "name"),
]


@pytest.fixture(autouse=True)
def _fresh_login_throttle():
    cache.clear()
    yield
    cache.clear()


def rows() -> tuple[int, int]:
    return StoredSecret.objects.count(), Schedule.objects.count()


@pytest.mark.parametrize("bad", ["\\u0000", "\\ud800", "\\udfff"])
@pytest.mark.parametrize(("method", "url", "template", "field"), ENDPOINTS)
def test_every_rest_body_refuses_text_postgresql_cannot_store(
    admin_client: Any, method: str, url: str, template: str, field: str, bad: str
) -> None:
    before = rows()
    response = admin_client.generic(
        method.upper(), url, template.format(bad=bad), content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert [error["field"] for error in response.json()["errors"]] == [field]
    assert rows() == before


@pytest.mark.parametrize(("method", "url", "_template", "_field"), ENDPOINTS)
def test_every_rest_body_refuses_json_nested_too_deep(
    admin_client: Any, method: str, url: str, _template: str, _field: str
) -> None:
    before = rows()
    for depth in (65, 50_000):
        text = '{"value": ' + "[" * depth + "]" * depth + "}"
        response = admin_client.generic(method.upper(), url, text, content_type="application/json")
        assert response.status_code == 400, response.content
        assert "nested" in response.json()["detail"]
    assert rows() == before


@pytest.mark.parametrize("value", ["a\x00b", "\ud800"])
def test_a_secret_value_postgresql_or_http_cannot_carry_is_refused_by_the_store_itself(value: str) -> None:
    with pytest.raises(BadRequest) as refused:
        set_secret(name="payments.key", value=value)
    assert refused.value.extra["errors"][0]["field"] == "value"
    assert "\x00" not in refused.value.detail and "\ud800" not in refused.value.detail
    assert not StoredSecret.objects.filter(name="payments.key").exists()
