"""The JSON-valued fields of the approval requests' bodies, typed as the OpenAPI schema documents them.

Each is a JSON field whose value the body's own checks validate in full (approval_requests.pinning,
approval_requests.filing); the schema states what a schema can: the object, its keys, their types, the
sizes. Rule: whatever the schema refuses, the checks refuse too (a key it does not list, a value of
another type); what the schema cannot state (an absolute http(s) URL, header names, secret headers among
the headers, a finite policy's duration) is refused by the checks with a 400 naming the field.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from approval_requests import pinning
from approvals.hitl_config import TIMEOUT_POLICIES

_HEADERS = {
    "type": "object",
    "nullable": True,
    "maxProperties": pinning.HEADERS_MAX,
    "additionalProperties": {"type": "string", "maxLength": pinning.HEADER_VALUE_MAX},
    "description": "Header name to value (names are case-insensitive and given once)",
}
_REQUEST_PARTS = {
    "method": {"type": "string", "description": f"{', '.join(pinning.METHODS)} (any case)"},
    "url": {
        "type": "string",
        "maxLength": pinning.URL_MAX,
        "description": "Absolute http or https URL, no credentials in it",
    },
    "headers": _HEADERS,
    "body": {"type": "string", "nullable": True, "description": "The body as text (a JSON body as its text)"},
}


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "properties": {
            **_REQUEST_PARTS,
            "secretHeaders": {
                "type": "array",
                "nullable": True,
                "items": {"type": "string"},
                "description": "Names of headers whose values nobody may see (each one of the headers)",
            },
        },
        "required": ["method", "url"],
        "additionalProperties": False,
    }
)
class PinnedRequestField(serializers.JSONField):
    """An exact HTTP request: ``{"method", "url", "headers", "body", "secretHeaders"}``."""


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "minProperties": 1,
        "properties": _REQUEST_PARTS,
        "additionalProperties": False,
    }
)
class RequestAmendmentField(serializers.JSONField):
    """A reviewer's edit of a pinned request: the visible parts to change, secret headers never."""


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "properties": {
            "approvalTimeout": {
                "type": "string",
                "nullable": True,
                "description": "ISO-8601 duration (e.g. PT15M); required with a finite policy",
            },
            "timeoutPolicy": {"type": "string", "nullable": True, "enum": [*TIMEOUT_POLICIES, None]},
            "allowSelfApproval": {"type": "boolean", "nullable": True},
            "allowEdit": {"type": "boolean", "nullable": True},
            "allowRespond": {"type": "boolean", "nullable": True},
        },
        "additionalProperties": False,
    }
)
class RequestConfigField(serializers.JSONField):
    """A request's ``hitlConfig``: its timeout and who may do what with it."""
