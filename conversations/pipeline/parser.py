"""The ``parser`` task: the user's words become expressions such as ``delete_account(me)``.

Rules:

- The input is normalised for matching only (``memory.current.input`` itself is not changed):
  lower-cased, typographic apostrophes made plain, every other punctuation character replaced by a
  space, whitespace collapsed. The normalised text is recorded in ``data["parser:normalized"]``.
- At each token, dictionary entries are tried in this order and the first kind that matches wins:
  phrases (whole-word sequences, longest first), words, regexes (``re.fullmatch`` against the one
  token, case-insensitive, in dictionary order). A token nothing matches becomes ``unknown(<token>)``.
- Every entry of the same phrase or word contributes its expressions; of the regexes only the first
  matching entry does, with each ``*`` argument replaced by the matched token.
- A string under the step context's ``expressions`` key is appended after the parsed ones.
- An entry whose expressions do not parse is skipped (documents are validated on save; a runner never
  crashes a turn).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from conversations.pipeline.conversation_memory import ConversationMemory
from conversations.pipeline.expressions import Expression, ExpressionSyntaxError, parse_expressions
from conversations.pipeline.registry import TurnContext

_PUNCTUATION = re.compile(r"[^\w\s']")
_WHITESPACE = re.compile(r"\s+")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


def normalize_input(text: str) -> str:
    """Lower-case, strip punctuation other than apostrophes, collapse whitespace."""
    text = text.lower().translate(_APOSTROPHES)
    text = _PUNCTUATION.sub(" ", text)
    return _WHITESPACE.sub(" ", text).strip()


@dataclass
class Dictionary:
    """A task's dictionaries, indexed for matching."""

    phrases: dict[tuple[str, ...], list[Expression]] = field(default_factory=dict)
    words: dict[str, list[Expression]] = field(default_factory=dict)
    regexes: list[tuple[re.Pattern[str], list[Expression]]] = field(default_factory=list)

    @classmethod
    def from_entries(cls, entries: list[dict[str, Any]]) -> Dictionary:
        dictionary = cls()
        for entry in entries:
            expressions = _safe_parse(str(entry.get("expressions", "")))
            if not expressions:
                continue
            if entry.get("phrase"):
                tokens = tuple(normalize_input(str(entry["phrase"])).split())
                if len(tokens) == 1:
                    dictionary.words.setdefault(tokens[0], []).extend(expressions)
                elif tokens:
                    dictionary.phrases.setdefault(tokens, []).extend(expressions)
            elif entry.get("word"):
                for word in normalize_input(str(entry["word"])).split()[:1]:
                    dictionary.words.setdefault(word, []).extend(expressions)
            elif entry.get("regex"):
                try:
                    pattern = re.compile(str(entry["regex"]), re.IGNORECASE)
                except re.error:
                    continue
                dictionary.regexes.append((pattern, expressions))
        dictionary.phrases = dict(sorted(dictionary.phrases.items(), key=lambda item: -len(item[0])))
        return dictionary

    def match_at(self, tokens: list[str], start: int) -> tuple[int, list[Expression]]:
        """How many tokens from ``start`` are consumed and the expressions they yield."""
        for phrase in self.phrases:  # longest first, see from_entries
            if tuple(tokens[start : start + len(phrase)]) == phrase:
                return len(phrase), list(self.phrases[phrase])
        token = tokens[start]
        if token in self.words:
            return 1, list(self.words[token])
        for pattern, expressions in self.regexes:
            if pattern.fullmatch(token):
                return 1, [_fill_wildcards(expression, token) for expression in expressions]
        return 1, [Expression("unknown", (Expression(token),))]


def parse_input(text: str, dictionary: Dictionary) -> list[Expression]:
    """The expressions of ``text`` in input order (see module rules)."""
    tokens = normalize_input(text).split()
    result: list[Expression] = []
    position = 0
    while position < len(tokens):
        consumed, expressions = dictionary.match_at(tokens, position)
        result.extend(expressions)
        position += consumed
    return result


def run(task: dict[str, Any], memory: ConversationMemory, turn: TurnContext) -> None:
    """Write ``outputs["expressions"]`` (comma-joined) and ``data["expressions:parsed"]`` (list)."""
    step = memory.current
    dictionary = Dictionary.from_entries(list(task.get("dictionaries") or []))
    expressions = parse_input(step.input or "", dictionary)
    sent = step.context.get("expressions")
    if isinstance(sent, str):
        try:
            expressions.extend(parse_expressions(sent))
        except ExpressionSyntaxError as error:
            step.data["parser:context_expressions_error"] = str(error)
    parsed = [str(expression) for expression in expressions]
    step.data["parser:normalized"] = normalize_input(step.input or "")
    step.data["expressions:parsed"] = parsed
    step.outputs["expressions"] = ", ".join(parsed)


def _safe_parse(text: str) -> list[Expression]:
    try:
        return parse_expressions(text)
    except ExpressionSyntaxError:
        return []


def _fill_wildcards(expression: Expression, token: str) -> Expression:
    """Replace every ``*`` argument (at any depth) by the matched token."""
    args = tuple(
        Expression(token) if arg.name == "*" and not arg.args else _fill_wildcards(arg, token)
        for arg in expression.args
    )
    return Expression(expression.name, args)
