"""What a tool answers: its JSON, or a structured error ``{"error", "errorCode", "details"?}``.

A programmatic client branches on ``errorCode``, one of a fixed set. The project's ``ApplicationError``
subclasses carry their own code; one outside the set (a surface's own, such as NOT_DEPLOYED) is mapped
by its HTTP status and keeps its code in ``details.code``. Anything else is INTERNAL, with no text of
the exception (it could carry a value nobody should see); the exception is logged.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.conf import settings
from mcp_types import CallToolResult, TextContent
from pydantic import ValidationError
from rest_framework.utils.encoders import JSONEncoder

from common.errors import ApplicationError, Disabled, LostRace

logger = logging.getLogger(__name__)

ERROR_CODES = frozenset(
    {"NOT_FOUND", "WRONG_STATE", "FORBIDDEN", "DISABLED", "BAD_REQUEST", "CONFLICT", "INTERNAL"}
)
_BY_STATUS = {
    400: "BAD_REQUEST",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    409: "WRONG_STATE",
    413: "BAD_REQUEST",
    429: "CONFLICT",  # THROTTLED (kept in details.code): EDDI's codes have none for a rate
}
MUTATIONS_SETTING = "HITL_MCP_MUTATIONS_ENABLED"


def error_code(exc: ApplicationError) -> str:
    if isinstance(exc, LostRace):  # another decision won the compare-and-set: EDDI's CONFLICT
        return "CONFLICT"
    if exc.code in ERROR_CODES:
        return exc.code
    return _BY_STATUS.get(exc.status, "INTERNAL")


def error_body(exc: ApplicationError) -> dict[str, Any]:
    code = error_code(exc)
    details = dict(exc.extra)
    if code != exc.code:
        details["code"] = exc.code
    body: dict[str, Any] = {"error": exc.detail, "errorCode": code}
    if details:
        body["details"] = details
    return body


def _as_json(value: Any) -> Any:
    """The value as REST would render it (DRF's encoder: ISO datetimes, UUIDs as strings)."""
    return json.loads(json.dumps(value, cls=JSONEncoder))


def answer(value: dict[str, Any]) -> CallToolResult:
    body = _as_json(value)
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body))], structured_content=body)


def refusal(body: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(_as_json(body)))],
        structured_content=_as_json(body),
        is_error=True,
    )


def argument_errors(exc: ValidationError) -> dict[str, Any]:
    """A tool's arguments that do not fit its input schema, as a refusal: each field with what is wrong
    (pydantic's message, never the value sent)."""
    errors = [
        {"field": ".".join(str(part) for part in error["loc"]) or "arguments", "message": error["msg"]}
        for error in exc.errors()
    ]
    fields = ", ".join(dict.fromkeys(error["field"] for error in errors))
    return {
        "error": f"Invalid arguments: {fields}",
        "errorCode": "BAD_REQUEST",
        "details": {"errors": errors},
    }


def failure(exc: Exception) -> CallToolResult:
    if isinstance(exc, ApplicationError):
        return refusal(error_body(exc))
    logger.exception("MCP tool failed")
    return refusal({"error": "Internal error", "errorCode": "INTERNAL"})


def require_mutations_enabled() -> None:
    """The kill switch of the decision tools, checked before anything else they do."""
    if not settings.HITL_MCP_MUTATIONS_ENABLED:
        raise Disabled(
            "HITL mutations over MCP are disabled on this server; use the read tools, REST or the admin",
            property=MUTATIONS_SETTING,
        )
