"""No secret in any log line: every log record passes through the redaction filter before any handler.

Rules:

- Every record created in the process (any logger, any level, handlers of uvicorn, gunicorn and django-q2
  included) has its message, its formatted exception and its stack text redacted: the shapes of
  ``toolgate.outbound.redaction.redact``, and every secret value this process resolved from ``${vault:…}``,
  ``${env:…}`` or ``${caller:token}`` (``remember_secret``) as written, JSON-escaped or percent-encoded.
- It is installed as the log record factory (``install``, from the toolgate app's ``ready``), so even a
  handler added later (pytest's, a log shipper's) never sees the raw text; ``RedactingFilter`` does the
  same on a handler for setups that configure logging before Django starts.
- httpx and httpcore log every request's full URL at INFO/DEBUG; settings keep them at WARNING.
- The process remembers at most ``MAX_REMEMBERED`` values (the newest), only in memory.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from typing import Any

from toolgate.outbound.redaction import MIN_KNOWN_SECRET_LENGTH, REDACTED, known_secrets_pattern, redact

MAX_REMEMBERED = 512

_lock = threading.Lock()
_remembered: OrderedDict[str, None] = OrderedDict()
_pattern: re.Pattern[str] | None = None
_installed = False


def remember_secret(value: str | None) -> None:
    """Redact ``value`` from every later log record of this process."""
    global _pattern
    if not value or len(value) < MIN_KNOWN_SECRET_LENGTH or value == REDACTED:
        return
    with _lock:
        if value in _remembered:
            _remembered.move_to_end(value)
            return
        _remembered[value] = None
        while len(_remembered) > MAX_REMEMBERED:
            _remembered.popitem(last=False)
        _pattern = known_secrets_pattern(list(_remembered))


def redact_log_text(text: str) -> str:
    pattern = _pattern
    text = redact(text)
    return pattern.sub(REDACTED, text) if pattern is not None else text


def redact_record(record: logging.LogRecord) -> logging.LogRecord:
    """``record`` with its message, exception text and stack text redacted (in place)."""
    try:
        message = record.getMessage()
    except Exception:  # a record whose arguments do not format: keep what logging would show, redacted
        message = f"{record.msg!s} {record.args!r}"
    cleaned = redact_log_text(message)
    if cleaned != message:
        _replace_message(record, cleaned)
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact_log_text(record.exc_text)
    if record.stack_info:
        record.stack_info = redact_log_text(record.stack_info)
    return record


def _replace_message(record: logging.LogRecord, cleaned: str) -> None:
    """Redact argument by argument where that suffices (formatters such as uvicorn's access log unpack
    ``args``), else replace the message by its redacted text."""
    if isinstance(record.msg, str) and isinstance(record.args, tuple):
        args = tuple(redact_log_text(arg) if isinstance(arg, str) else arg for arg in record.args)
        msg = redact_log_text(record.msg)
        try:
            rebuilt = msg % args if args else msg
        except (TypeError, ValueError):
            rebuilt = None
        if rebuilt is not None and redact_log_text(rebuilt) == rebuilt:
            record.msg, record.args = msg, args
            return
    record.msg, record.args = cleaned, ()


class RedactingFilter(logging.Filter):
    """A handler filter that redacts each record (see module rules); it never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


def install() -> None:
    """Make every log record of this process pass through ``redact_record`` as it is created."""
    global _installed
    with _lock:
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            return redact_record(previous(*args, **kwargs))

        logging.setLogRecordFactory(factory)
        _installed = True
