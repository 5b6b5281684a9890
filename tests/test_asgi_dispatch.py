"""The ASGI application's dispatch (mcp_surface/asgi.py): exactly ``/mcp`` goes to the MCP endpoint, every
other path to Django, so a path holding a control character is the API's problem-details 404 (schemathesis
found Starlette's text/plain 404 for them), never an answer of the router in front of Django."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from django.core.asgi import get_asgi_application
from rest_framework.authtoken.models import Token

from mcp_surface.asgi import with_mcp

CONTROL_CHARACTERS = ["%0A", "%0D", "%09", "%1F", "%7F", "a%0Ab"]


def get_over_asgi(path: str, token: str | None = None) -> httpx.Response:
    app = with_mcp(get_asgi_application())
    headers = {"Authorization": f"Token {token}"} if token else {}

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return await client.get(path, headers=headers)

    return asyncio.run(get())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("segment", CONTROL_CHARACTERS)
def test_a_path_with_a_control_character_is_a_problem_details_404(admin_user, segment):
    token = Token.objects.get(user=admin_user).key

    for path in (f"/agents/{segment}/approval-status", f"/groupstore/groups/{segment}", f"/{segment}"):
        response = get_over_asgi(path, token)

        assert response.status_code == 404, (path, response.text)
        assert response.headers["Content-Type"] == "application/problem+json", path
        assert response.json()["code"] == "NOT_FOUND"


@pytest.mark.django_db(transaction=True)
def test_only_the_exact_mcp_path_reaches_the_mcp_endpoint():
    # Django's 404 for /mcp followed by a newline; the MCP endpoint's own 401 for /mcp itself
    assert get_over_asgi("/mcp%0A").headers["Content-Type"] == "application/problem+json"
    assert get_over_asgi("/mcp").status_code == 401
