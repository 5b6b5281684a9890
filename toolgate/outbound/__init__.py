"""Outbound HTTP: building, sending and showing the requests of declared calls, without leaking secrets.

A declared call (``http_call_config``) is rendered from templates, its ``${vault:…}``, ``${env:…}`` and
``${caller:…}`` references resolved (``secret_references``, ``secret_store``), sent through the egress
guard with retries (``http_calls``, ``http_requests``, ``egress``), and shown to people only as a
redacted view (``request_views``, ``redaction``); no secret reaches a log line (``log_redaction``).
It imports neither the gate nor the runtime.

Other apps import these names from here, never from a module of this package.
"""

from toolgate.outbound.egress import EgressRefused
from toolgate.outbound.http_call_config import read_call_processing
from toolgate.outbound.http_calls import CallEffects, run_http_call
from toolgate.outbound.http_requests import BuiltRequest, outbound_client, without_secrets
from toolgate.outbound.redaction import (
    redact,
    redact_headers,
    redact_json_value,
    redact_query_pairs,
    redact_uri,
)
from toolgate.outbound.secret_store import SecretStoreUnavailable, UnknownSecret, secret_value
from toolgate.outbound.templates import MISSING, TEMPLATE_ROOTS, lookup_path, render, value_as_text

__all__ = [
    "MISSING",
    "TEMPLATE_ROOTS",
    "BuiltRequest",
    "CallEffects",
    "EgressRefused",
    "SecretStoreUnavailable",
    "UnknownSecret",
    "lookup_path",
    "outbound_client",
    "read_call_processing",
    "redact",
    "redact_headers",
    "redact_json_value",
    "redact_query_pairs",
    "redact_uri",
    "render",
    "run_http_call",
    "secret_value",
    "value_as_text",
    "without_secrets",
]
