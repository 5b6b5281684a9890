"""The minimal WSGI application of bench/wsgi_servers.py: the same small JSON answer, as Django's
``HttpResponse``, to every request; and the same on the thread pool of ``hitl_project.wsgi_bridge``
(the REST API's path under ``./scripts/start``) as an ASGI application."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings

settings.configure()  # HttpResponse reads the default charset; nothing else of Django runs

from django.http import HttpResponse  # noqa: E402

from hitl_project.wsgi_bridge import ThreadPoolWSGI  # noqa: E402

BODY = (
    b'{"conversationId":"0b4e7c1e-3f5a-4c2b-9a8e-123456789abc","pauseId":"5d0b3c1e-3f5a-4c2b-9a8e-'
    b'123456789abc","verdict":"APPROVED","decidedBy":"approver","state":"IN_PROGRESS"}'
)


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> HttpResponse:
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    response = HttpResponse(BODY, content_type="application/json")
    response["Content-Length"] = str(len(BODY))
    start_response("200 OK", list(response.items()))
    return response


on_thread_pool = ThreadPoolWSGI(application, workers=8)
