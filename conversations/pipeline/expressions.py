"""Expressions such as ``delete_account(me), greeting(hello)`` and matching them against patterns.

An expression is a name with optional arguments, each itself an expression. In a pattern, ``*`` as a
whole expression matches any one expression (with any arguments); inside a name it matches any run of
characters (``delete_*`` matches ``delete_account``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_NAME = re.compile(r"[^\s(),]+")


@dataclass(frozen=True)
class Expression:
    name: str
    args: tuple[Expression, ...] = ()

    def __str__(self) -> str:
        if not self.args:
            return self.name
        return f"{self.name}({', '.join(str(a) for a in self.args)})"


class ExpressionSyntaxError(ValueError):
    pass


# The patterns of an agent's rules are parsed on every turn: a short text's parse is kept (expressions
# are immutable), a long one (a user's input may be long) is parsed each time.
REMEMBERED_TEXT_LENGTH = 256


def parse_expressions(text: str) -> list[Expression]:
    """Parse a comma-separated list of expressions; raise ExpressionSyntaxError on bad syntax."""
    if len(text) <= REMEMBERED_TEXT_LENGTH:
        return list(_remembered(text))
    return _Parser(text).parse_list(top_level=True)


@functools.lru_cache(maxsize=4096)
def _remembered(text: str) -> tuple[Expression, ...]:
    return tuple(_Parser(text).parse_list(top_level=True))


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def parse_list(self, *, top_level: bool) -> list[Expression]:
        items: list[Expression] = []
        self._skip_space()
        if top_level and self.pos >= len(self.text):
            return items
        while True:
            items.append(self.parse_one())
            self._skip_space()
            if self.pos < len(self.text) and self.text[self.pos] == ",":
                self.pos += 1
                continue
            break
        if top_level and self.pos != len(self.text):
            raise ExpressionSyntaxError(f"unexpected '{self.text[self.pos]}' at position {self.pos}")
        return items

    def parse_one(self) -> Expression:
        self._skip_space()
        match = _NAME.match(self.text, self.pos)
        if not match:
            found = self.text[self.pos] if self.pos < len(self.text) else "end of text"
            raise ExpressionSyntaxError(
                f"expected an expression name at position {self.pos}, found {found!r}"
            )
        self.pos = match.end()
        name = match.group(0)
        self._skip_space()
        args: list[Expression] = []
        if self.pos < len(self.text) and self.text[self.pos] == "(":
            self.pos += 1
            self._skip_space()
            if self.pos < len(self.text) and self.text[self.pos] == ")":
                self.pos += 1
                return Expression(name, ())
            args = self.parse_list(top_level=False)
            self._skip_space()
            if self.pos >= len(self.text) or self.text[self.pos] != ")":
                raise ExpressionSyntaxError(f"missing ')' for '{name}(' at position {self.pos}")
            self.pos += 1
        return Expression(name, tuple(args))


def _name_matches(pattern: str, name: str) -> bool:
    if "*" not in pattern:
        return pattern == name
    pieces = pattern.split("*")
    if not name.startswith(pieces[0]) or not name.endswith(pieces[-1]):
        return False
    if len(pieces[0]) + len(pieces[-1]) > len(name):
        return False
    pos = len(pieces[0])
    end = len(name) - len(pieces[-1])
    for piece in pieces[1:-1]:
        found = name.find(piece, pos, end)
        if found < 0:
            return False
        pos = found + len(piece)
    return True


def expression_matches(pattern: Expression, candidate: Expression) -> bool:
    """Whether ``candidate`` matches ``pattern`` (``*`` alone matches any expression)."""
    if pattern.name == "*" and not pattern.args:
        return True
    if not _name_matches(pattern.name, candidate.name):
        return False
    if len(pattern.args) != len(candidate.args):
        return False
    return all(expression_matches(p, c) for p, c in zip(pattern.args, candidate.args, strict=True))


def all_patterns_match(patterns: list[Expression], candidates: list[Expression]) -> bool:
    """Every pattern matches at least one candidate (an empty pattern list never matches)."""
    if not patterns:
        return False
    return all(any(expression_matches(p, c) for c in candidates) for p in patterns)
