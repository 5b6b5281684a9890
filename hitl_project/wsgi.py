"""The WSGI application, for a server that runs the REST API and the admin alone (granian's WSGI
interface, gunicorn): Django's handler, with nothing of the process's own environment in a request.

granian's WSGI interface (like wsgiref, as CGI did) starts each request's environ from the process's
environment, and Django makes that environ the request's ``META``: ``DATABASE_URL`` with its password,
the Slack and mail settings, every variable of the process, where Django's error reports and anything
that logs a request's ``META`` would carry them. And a variable named like a header (``HTTP_PROXY``)
would pass for one the client sent. ``ProcessEnvironmentFree`` drops each variable of the process whose
value a request's environ still holds; the CGI variables that describe the request are kept. A server
that does not merge its environment (gunicorn) loses nothing. A header that carries exactly the value of
an environment variable named after it is dropped with it.
"""

import os
from collections.abc import Callable
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings.base")

import django  # noqa: E402
from django.core.handlers.wsgi import WSGIHandler  # noqa: E402

# The variables of RFC 3875 a server sets from the request and its connection: never dropped. Those a
# server sets only after authenticating the client itself (REMOTE_USER, AUTH_TYPE) are not among them:
# a variable of the process must never pass for one.
REQUEST_VARIABLES = frozenset(
    {
        "CONTENT_LENGTH",
        "CONTENT_TYPE",
        "GATEWAY_INTERFACE",
        "PATH_INFO",
        "QUERY_STRING",
        "REMOTE_ADDR",
        "REQUEST_METHOD",
        "SCRIPT_NAME",
        "SERVER_NAME",
        "SERVER_PORT",
        "SERVER_PROTOCOL",
        "SERVER_SOFTWARE",
    }
)


class ProcessEnvironmentFree(WSGIHandler):
    """Django's WSGI handler, dropping from each environ what the server copied from ``environment``
    (the process's, read when the handler is made)."""

    def __init__(self, environment: dict[str, str] | None = None) -> None:
        super().__init__()
        source = os.environ if environment is None else environment
        self.process_variables = tuple(
            (name, value) for name, value in source.items() if name not in REQUEST_VARIABLES
        )

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        for name, value in self.process_variables:
            if environ.get(name) == value:
                del environ[name]
        return super().__call__(environ, start_response)


django.setup(set_prefix=False)
application = ProcessEnvironmentFree()

from hitl_project.startup_checks import refuse_to_start_on_key_errors  # noqa: E402  (needs Django set up)
from hitl_project.warm_start import load_then_freeze  # noqa: E402  (needs Django set up)

refuse_to_start_on_key_errors()
load_then_freeze()
