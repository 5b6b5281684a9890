"""Secret references in a document's request text: ``${vault:NAME}``, ``${env:NAME}``, ``${caller:token}``.

Rules:

- A reference is resolved only in the document's own text, never in a value substituted into it
  (``toolgate.outbound.http_requests`` renders placeholders around the references), so the model cannot
  smuggle one in through ``{args.x}``.
- ``env`` reads the server's environment, ``vault`` the secret store, ``caller:token`` the API token of
  the identity the call acts for (``""`` when it has none), in headers only. An unknown reference
  fails with an error naming the reference, never a value.
- Every value resolved is an **injected value**: the service put it there, the model did not. Wherever
  a request is shown it appears as its reference (``${vault:payments.key}``), never as its value, and
  every resolved value is remembered by the log filter (``toolgate.outbound.log_redaction``).
- ``ReferenceSentinels`` resolves each reference to a random lower-case alphanumeric stand-in instead.
  A request built with it is byte for byte the request that is sent, except that each injected value
  is a stand-in that no encoding alters and that the model cannot guess; replacing the stand-ins by
  their references gives the request as a reviewer is shown it (``toolgate.outbound.request_views``).
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from toolgate.outbound.http_errors import SecretReferenceError
from toolgate.outbound.log_redaction import remember_secret
from toolgate.outbound.secret_store import SecretStoreUnavailable, UnknownSecret, secret_value

SECRET_REFERENCE = re.compile(r"\$\{(?P<scheme>env|vault|caller):(?P<name>[^{}]*)\}")
CALLER_TOKEN = "${caller:token}"  # nosec B105  # a reference's name, not a password


@dataclass(frozen=True)
class InjectedValue:
    """A value the service put into a request from a secret reference."""

    reference: str
    value: str

    @property
    def is_caller_token(self) -> bool:
        return self.reference == CALLER_TOKEN


# Resolves one reference match to the text that stands in the request.
ReferenceResolver = Callable[[re.Match[str], bool], str]


def check_reference(match: re.Match[str], *, allow_caller: bool) -> None:
    """Refuse a reference that may not stand here: an unknown scheme word, or the caller's token
    outside a header."""
    if match.group("scheme") != "caller":
        return
    if match.group("name") != "token":
        raise SecretReferenceError(f"unknown caller reference: {match.group(0)}")
    if not allow_caller:
        raise SecretReferenceError(f"{match.group(0)} is only allowed in headers")


def resolved_value(match: re.Match[str], *, caller_token: str | None) -> str:
    """The value a reference stands for (see module rules)."""
    scheme, name, reference = match.group("scheme"), match.group("name"), match.group(0)
    if scheme == "env":
        if name not in os.environ:
            raise SecretReferenceError(f"unknown environment variable: {reference}")
        return os.environ[name]
    if scheme == "vault":
        try:
            return secret_value(name)
        except UnknownSecret:
            raise SecretReferenceError(f"unknown secret: {reference}") from None
        except SecretStoreUnavailable as unavailable:
            raise SecretReferenceError(
                f"secret store unavailable ({unavailable.problem}): {reference}"
            ) from None
    return caller_token or ""


@dataclass
class ReferenceValues:
    """Resolves references to their values and records each as an ``InjectedValue``, in order."""

    caller_token: str | None
    injected: list[InjectedValue] = field(default_factory=list)

    def __call__(self, match: re.Match[str], allow_caller: bool) -> str:
        check_reference(match, allow_caller=allow_caller)
        value = resolved_value(match, caller_token=self.caller_token)
        remember_secret(value)  # from now on no log line of this process carries it
        self.injected.append(InjectedValue(match.group(0), value))
        return value


@dataclass
class ReferenceSentinels:
    """Resolves each reference to a fresh stand-in (see module rules) and remembers which it stands for."""

    nonce: str = field(default_factory=lambda: secrets.token_hex(12))
    references: dict[str, str] = field(default_factory=dict)

    def __call__(self, match: re.Match[str], allow_caller: bool) -> str:
        check_reference(match, allow_caller=allow_caller)
        sentinel = f"hitlref{self.nonce}n{len(self.references)}x"
        self.references[sentinel] = match.group(0)
        return sentinel

    def named(self, text: str) -> str:
        """``text`` with every stand-in replaced by the reference it stands for."""
        if "hitlref" not in text:
            return text
        for sentinel, reference in self.references.items():
            text = text.replace(sentinel, reference)
        return text


def resolve_secret_references(
    text: str, *, caller_token: str | None, allow_caller: bool, used: list[str] | None = None
) -> str:
    """``text`` with every reference replaced by its value (see module rules); each value resolved is
    appended to ``used``."""
    values = ReferenceValues(caller_token)
    resolved = SECRET_REFERENCE.sub(lambda match: values(match, allow_caller), text)
    if used is not None:
        used.extend(item.value for item in values.injected if item.value)
    return resolved
