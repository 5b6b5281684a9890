"""The JSON parser of every REST endpoint: a body passes common.body_rules before a view sees it."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from common.body_rules import MAX_JSON_DEPTH, refuse_bad_body

TOO_DEEP = f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels"


class CheckedJSONParser(JSONParser):
    """DRF's JSONParser, and then common.body_rules: what PostgreSQL cannot store, or nesting beyond
    the limit, is a 400 naming its field (and so is nesting so deep that the decoder runs out of stack)."""

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None
    ) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(TOO_DEEP) from None
        refuse_bad_body(data)
        return data
