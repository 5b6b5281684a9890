"""Expressions (conversations.pipeline.expressions): parsing, and a short text's parse kept."""

from __future__ import annotations

import pytest

from conversations.pipeline.expressions import (
    REMEMBERED_TEXT_LENGTH,
    Expression,
    ExpressionSyntaxError,
    parse_expressions,
)


def test_a_kept_parse_is_the_parse_and_each_caller_gets_its_own_list():
    first = parse_expressions("delete_account(me), greeting(hello)")
    first.append(Expression("added"))

    again = parse_expressions("delete_account(me), greeting(hello)")

    assert again == [
        Expression("delete_account", (Expression("me"),)),
        Expression("greeting", (Expression("hello"),)),
    ]
    assert first is not again


def test_a_long_text_parses_as_a_short_one_does():
    names = [f"name_{i}" for i in range(REMEMBERED_TEXT_LENGTH // 4)]
    text = ", ".join(names)
    assert len(text) > REMEMBERED_TEXT_LENGTH

    assert parse_expressions(text) == [Expression(name) for name in names]


@pytest.mark.parametrize("text", ["greeting(", "a,,b", "x" * (REMEMBERED_TEXT_LENGTH + 1) + "("])
def test_bad_syntax_is_refused_every_time(text):
    for _ in range(2):  # a refusal is never kept as a parse
        with pytest.raises(ExpressionSyntaxError):
            parse_expressions(text)
