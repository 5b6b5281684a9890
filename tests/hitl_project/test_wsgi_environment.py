"""hitl_project.wsgi.ProcessEnvironmentFree: what a server copies of its process's environment into a
request's environ never reaches Django; what describes the request does."""

from __future__ import annotations

import io
from typing import Any

import pytest

from hitl_project.wsgi import ProcessEnvironmentFree

pytestmark = pytest.mark.django_db

PROCESS = {
    "DATABASE_URL": "postgres://hitl:s3cret@db/hitl",
    "HTTP_AUTHORIZATION": "Token process-variable",
    "HTTP_PROXY": "http://proxy.internal:3128",
    "REMOTE_USER": "admin",  # set by a server that authenticated the client itself, never by the process
    "SERVER_NAME": "testserver",  # a CGI variable: the request's own
}


def request_environ(**extra: Any) -> dict[str, Any]:
    """A GET as granian's WSGI interface hands it over: the process's environment, then the
    request's variables on top."""
    return {
        **PROCESS,
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/no-such-page",
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
        "wsgi.errors": io.StringIO(),
        **extra,
    }


def served(environ: dict[str, Any]) -> str:
    statuses = []
    response = ProcessEnvironmentFree(PROCESS)(environ, lambda status, headers: statuses.append(status))
    response.close()
    return statuses[0]


def test_the_process_environment_is_dropped_from_a_request():
    environ = request_environ()

    assert served(environ).startswith("404")  # Django answered it

    assert "DATABASE_URL" not in environ
    assert "HTTP_AUTHORIZATION" not in environ
    assert "HTTP_PROXY" not in environ
    assert "REMOTE_USER" not in environ
    assert environ["SERVER_NAME"] == "testserver"
    assert environ["PATH_INFO"] == "/no-such-page"


def test_a_header_the_client_sent_is_kept_though_a_variable_is_named_after_it():
    environ = request_environ(HTTP_AUTHORIZATION="Token the-clients-own")

    served(environ)

    assert environ["HTTP_AUTHORIZATION"] == "Token the-clients-own"
    assert "DATABASE_URL" not in environ
