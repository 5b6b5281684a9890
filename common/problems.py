"""RFC 9457 problem details for every error, from one exception handler."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from common.errors import ApplicationError
from common.request_bodies import field_errors

logger = logging.getLogger(__name__)

PROBLEM_CONTENT_TYPE = "application/problem+json"
# The database could not be reached, or its answer was lost: a 503 the client retries after re-reading.
DATABASE_UNAVAILABLE = (
    "The database did not answer: this request may not have taken effect, or its commit may have landed "
    "with the answer lost. Read the state again, then retry what did not happen."
)
DATABASE_RETRY_AFTER_SECONDS = "1"

_DRF_CODES = {
    400: ("BAD_REQUEST", "Bad request"),
    401: ("UNAUTHENTICATED", "Unauthenticated"),
    403: ("FORBIDDEN", "Forbidden"),
    404: ("NOT_FOUND", "Not found"),
    405: ("BAD_REQUEST", "Method not allowed"),
    406: ("BAD_REQUEST", "Not acceptable"),
    409: ("CONFLICT", "Conflict"),
    415: ("BAD_REQUEST", "Unsupported media type"),
    429: ("THROTTLED", "Too many requests"),
}


def problem_response(status: int, code: str, title: str, detail: str, **extra: Any) -> Response:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, "code": code, **extra}
    return Response(body, status=status, content_type=PROBLEM_CONTENT_TYPE)


def problem_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | HttpResponse:
    """The error as problem details; as its ``detail`` alone, in plain text, for a client that prefers
    text (``prefers_plain_text``), as EDDI's clients read its errors."""
    problem = _problem(exc)
    request = context.get("request")
    if request is not None and prefers_plain_text(request.META.get("HTTP_ACCEPT", "")):
        return plain_text(problem)
    return problem


def prefers_plain_text(accept: str) -> bool:
    """The first media range of ``accept`` is ``text/plain`` (``text/plain, application/json;q=0.9``:
    text errors, JSON answers). A request that accepts only text/plain is refused (406) before any view
    runs, as every answer here is JSON."""
    first = accept.split(",", 1)[0].split(";", 1)[0].strip().lower()
    return first == "text/plain"


def plain_text(problem: Response) -> HttpResponse:
    text = HttpResponse(
        str(problem.data.get("detail", "")),
        status=problem.status_code,
        content_type="text/plain; charset=utf-8",
    )
    for header in ("WWW-Authenticate", "Allow", "Retry-After"):
        if header in problem:
            text[header] = problem[header]
    return text


def _problem(exc: Exception) -> Response:
    if isinstance(exc, ApplicationError):
        return problem_response(exc.status, exc.code, exc.title, exc.detail, **exc.extra)
    if isinstance(exc, OperationalError | InterfaceError):
        logger.error("database unavailable", exc_info=exc)
        problem = problem_response(503, "UNAVAILABLE", "Service unavailable", DATABASE_UNAVAILABLE)
        problem["Retry-After"] = DATABASE_RETRY_AFTER_SECONDS
        return problem
    if isinstance(exc, RequestDataTooBig):
        # Django raises it where the body is first read (request.data, request.body), before parsing.
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return problem_response(
            413,
            "BAD_REQUEST",
            "Payload too large",
            f"The body is larger than the limit of {limit} bytes",
            errors=[{"field": "body", "message": f"over {limit} bytes"}],
        )
    if isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
        return problem_response(
            400, "BAD_REQUEST", "Bad request", str(exc), errors=[{"field": "body", "message": str(exc)}]
        )
    if isinstance(exc, Http404):
        exc = drf_exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = drf_exceptions.PermissionDenied()
    response = drf_exception_handler(exc, {})
    if response is None:
        logger.exception("unhandled error", exc_info=exc)
        return problem_response(500, "INTERNAL", "Internal error", "An internal error occurred.")
    status = response.status_code
    code, title = _DRF_CODES.get(status, ("INTERNAL", "Error"))
    extra: dict[str, Any] = {}
    if isinstance(exc, drf_exceptions.ValidationError):
        errors = field_errors(exc.detail)
        extra["errors"] = errors
        detail = "; ".join(f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in errors)
    else:
        detail = str(getattr(exc, "detail", exc))
    if isinstance(exc, drf_exceptions.Throttled) and exc.wait is not None:
        extra["retryAfter"] = exc.wait  # Retry-After's seconds, in the body too
    problem = problem_response(status, code, title, detail or title, **extra)
    for header in ("WWW-Authenticate", "Allow", "Retry-After"):
        if header in response:
            problem[header] = response[header]
    return problem


def not_found_handler(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's 404 for a URL no route matches (a schedule id that is not a number), as problem details
    like every other error; the admin keeps its own page."""
    if request.path.startswith("/admin/"):
        return page_not_found(request, exception)
    body = {
        "type": "about:blank",
        "title": "Not found",
        "status": 404,
        "detail": "Not found.",
        "code": "NOT_FOUND",
    }
    return JsonResponse(body, status=404, content_type=PROBLEM_CONTENT_TYPE)
