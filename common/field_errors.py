"""A validation finding tied to the place in a document it is about, and the helpers every validator uses
to name places and types and to measure a text against its length limit (conversations' agent
documents, toolgate's call configs, decision bodies)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """``field`` is a path into the validated document such as ``workflows[0].tasks[1].rules[0].name``;
    an empty path means the document as a whole."""

    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


def child(path: str, key: str | int) -> str:
    """``workflows`` + 0 -> ``workflows[0]``; ``workflows[0]`` + ``id`` -> ``workflows[0].id``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def json_type(value: object) -> str:
    """The JSON name of ``value``'s type, as an error message says it (``got string``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units, as the original (Java's ``String.length()``) counts it: an emoji counts
    2, so a length limit refuses exactly what the original's clients expect it to refuse."""
    return len(text.encode("utf-16-le")) // 2
