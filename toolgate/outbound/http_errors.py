"""The errors of building and sending a declared HTTP call: each message is safe to store and show."""

from __future__ import annotations


class HttpCallError(Exception):
    """A declared call could not be built or sent; the message names no resolved value."""


class SecretReferenceError(HttpCallError):
    """A ``${…}`` secret reference cannot be resolved. Names the reference, never a value."""
