"""Expected refusals log one line: Django logs a view's PermissionDenied (403) with its traceback.

A refused request is the service working as designed, not a bug to debug; a traceback per refusal
buries the real errors. Server errors (5xx) keep theirs.
"""

from __future__ import annotations

import logging


class OneLineClientErrors(logging.Filter):
    """Drops the traceback of a ``django.request`` record about a 4xx response; keeps the record."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
