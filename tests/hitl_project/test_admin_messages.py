"""Django's messages are set up for the admin only (hitl_project/admin_messages.py): the admin still shows
them, a REST request never pays for their storage."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages, success
from django.contrib.messages.api import MessageFailure
from django.http import HttpResponse
from django.test import RequestFactory

from hitl_project.admin_messages import AdminMessageMiddleware


def through_middleware(path: str):
    seen = {}

    def view(request):
        seen["request"] = request
        return HttpResponse("ok")

    request = RequestFactory().get(path)
    request.session = {}  # what SessionMiddleware sets before it; the session storage reads it
    AdminMessageMiddleware(view)(request)
    return seen["request"]


def test_an_admin_request_has_its_messages():
    request = through_middleware("/admin/approvals/pendingapproval/")
    success(request, "decided")
    assert [str(message) for message in get_messages(request)] == ["decided"]


@pytest.mark.parametrize("path", ["/agents/abc/resume", "/administration/production/deploy/x", "/adminx"])
def test_a_request_outside_the_admin_sets_up_no_message_storage(path):
    request = through_middleware(path)
    assert not hasattr(request, "_messages") and list(get_messages(request)) == []
    with pytest.raises(MessageFailure):
        success(request, "never shown")


def test_the_projects_middleware_keeps_the_messages_for_the_admin(settings):
    assert "hitl_project.admin_messages.AdminMessageMiddleware" in settings.MIDDLEWARE
    assert "django.contrib.messages.middleware.MessageMiddleware" not in settings.MIDDLEWARE
