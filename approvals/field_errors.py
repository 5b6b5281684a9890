"""A validation finding tied to the place in a document it is about."""

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
