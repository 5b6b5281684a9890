"""JSON columns written and read by the hand-written statements (``common.rows``), with orjson where it
gives exactly what the standard library gives (decision record 0018).

A cycle of the approval flow writes about 33 JSON values and reads about 30, most of them small (half
are ``{}``). Each goes through ``json.dumps`` or ``json.loads``, whose Python layers cost more than the
encoding itself; orjson does the same in C at a fraction of the cost. The two must agree on what lands
in PostgreSQL and what a read hands back, so orjson's answer is used only where it is the standard
library's:

- **Writing** (``dumped``): orjson writes ``null`` for a NaN or an infinity, where ``json.dumps`` writes
  ``NaN``, which PostgreSQL refuses: a text with ``null`` in it is written by ``json.dumps`` instead.
  What orjson refuses (a dict key that is not a string, an integer beyond 64 bits, a nesting deeper
  than 254, a lone surrogate, a datetime or a dataclass) goes to ``json.dumps`` too, which writes it
  or raises as before. Floats are written in their shortest form by both (``1e16`` against
  ``1e+16``), the same number to PostgreSQL. orjson also writes a UUID, an enum and a numpy value,
  which ``json.dumps`` refuses; nothing the service stores holds one.
- **Reading** (``loaded``): orjson reads an integer beyond 64 bits as a float and refuses ``1e400``,
  so a text with 19 digits in a row (where such a number would be) or one orjson refuses is read by
  ``json.loads``. PostgreSQL's own text of a ``jsonb`` value is what is read here: never a NaN.

Only a ``JSONField`` of exactly that class with neither an encoder nor a decoder takes this path; any
other field keeps Django's.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from django.db import models

# datetimes and dataclasses are refused (json.dumps refuses them), not written as orjson would write them
_DUMP_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_LONG_NUMBER = re.compile(rb"\d{19}")


def plain_json_field(field: Any) -> bool:
    """Whether ``field`` stores JSON as Django's ``JSONField`` does with the standard library's encoder
    and decoder: exactly that class, neither given."""
    return type(field) is models.JSONField and field.encoder is None and field.decoder is None


def dumped(value: Any) -> bytes | str:
    """``json.dumps(value)``, or what PostgreSQL stores alike from orjson's text."""
    try:
        text = orjson.dumps(value, option=_DUMP_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: what json.dumps may still write, or raise about
        return json.dumps(value)
    if b"null" in text:  # a None, or a NaN or an infinity that orjson would turn into one
        return json.dumps(value)
    return text


def loaded(text: str | bytes) -> Any:
    """``json.loads(text)`` for a text PostgreSQL wrote: orjson's answer unless a number may be too long
    for it, or it refuses the text."""
    raw = text.encode() if isinstance(text, str) else text
    if isinstance(raw, bytes) and _LONG_NUMBER.search(raw) is None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def from_db(value: Any, expression: Any, connection: Any) -> Any:
    """A plain ``JSONField``'s ``from_db_value``: None stays None, a text that is not JSON comes back as
    it is (as Django's does)."""
    if value is None:
        return value
    try:
        return loaded(value)
    except json.JSONDecodeError:
        return value
