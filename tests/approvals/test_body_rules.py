"""common.body_rules: what a request body may carry, as plain functions (no database)."""

from __future__ import annotations

import json

import pytest

from common.body_rules import (
    MAX_JSON_DEPTH,
    MAX_REPORTED,
    body_errors,
    shown_text,
    unstorable_text_problem,
)


@pytest.mark.parametrize("text", ["a\x00b", "\x00", "\ud800", "ok \udfff", "\ud83d"])
def test_text_postgresql_cannot_store_is_refused(text):
    assert unstorable_text_problem(text) is not None


@pytest.mark.parametrize(
    "text", ["", "plain", "ünïcödé — 😀", json.loads('"\\ud83d\\ude00"'), "tab\tnewline\n"]
)
def test_storable_text_passes_and_a_surrogate_pair_is_one_character(text):
    assert unstorable_text_problem(text) is None


def test_every_place_is_named_keys_values_and_list_items_at_any_depth():
    body = json.loads(
        '{"input": "a\\u0000", "context": {"k\\u0000": "v", "deep": {"list": [1, "\\ud800", {"x": "ok"}]}}}'
    )
    assert [(e["field"], e["message"].split(" (")[0]) for e in body_errors(body)] == [
        ("input", "contains a NUL character"),
        ("context.k\\u0000", "the key contains a NUL character"),
        ("context.deep.list[1]", "contains a lone surrogate"),
    ]


def test_a_field_prefix_extends_every_path():
    errors = body_errors({"call-1": {"note": "\x00"}}, field="toolDecisions")
    assert [e["field"] for e in errors] == ["toolDecisions.call-1.note"]


def test_a_number_too_large_to_store_is_refused():
    (error,) = body_errors(json.loads('{"context": {"n": 1e400}}'))
    assert error == {"field": "context.n", "message": "is a number too large to store"}
    assert body_errors({"n": 10**30, "f": 1.5, "b": True, "z": None}) == []


def test_json_nested_deeper_than_the_limit_is_refused_at_any_depth():
    at_limit = json.loads("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)
    assert body_errors(at_limit) == []
    too_deep: list = []
    for _ in range(50_000):  # far beyond any recursion limit: the walk is iterative
        too_deep = [too_deep]
    (error,) = body_errors(too_deep, field="context")
    assert error == {"field": "context", "message": f"nested deeper than {MAX_JSON_DEPTH} levels"}


def test_a_body_full_of_bad_text_gets_a_bounded_answer():
    assert len(body_errors(["\x00"] * 10_000)) == MAX_REPORTED


def test_quoted_text_is_cut_and_never_echoes_a_bad_character():
    assert shown_text("MA\x00YBE\ud800") == "MA\\u0000YBE\\ud800"
    assert shown_text("x" * 100, limit=10) == "x" * 10 + "…"
    shown_text("\ud800" * 100).encode("utf-8")  # can always be sent
