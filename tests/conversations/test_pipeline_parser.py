"""The parser task: input text to expressions."""

from __future__ import annotations

from conversations.pipeline import parser
from conversations.pipeline.conversation_memory import ConversationMemory, Step
from conversations.pipeline.parser import normalize_input
from conversations.pipeline.registry import TurnContext

DICTIONARIES = [
    {"phrase": "delete my account", "expressions": "delete_account(me)"},
    {"phrase": "delete my", "expressions": "delete_partial(me)"},
    {"word": "hello", "expressions": "greeting(hello)"},
    {"word": "delete", "expressions": "delete(*)"},
    {"regex": "\\d+", "expressions": "number(*)"},
]


def parse(text: str, dictionaries: list[dict] = DICTIONARIES, context: dict | None = None) -> Step:
    memory = ConversationMemory("c1", current=Step(input=text, context=context or {}))
    parser.run({"type": "parser", "dictionaries": dictionaries}, memory, TurnContext({}, "c1"))
    return memory.current


def test_input_is_lowercased_stripped_of_punctuation_but_apostrophes_and_collapsed() -> None:
    assert normalize_input("  Hello,   World!! Don't   STOP… ") == "hello world don't stop"
    assert normalize_input("it\u2019s") == "it's"


def test_phrase_matches_whole_word_sequence_case_insensitively() -> None:
    step = parse("Please, DELETE my account!")
    assert step.data["expressions:parsed"] == ["unknown(please)", "delete_account(me)"]
    assert step.outputs["expressions"] == "unknown(please), delete_account(me)"


def test_longest_phrase_wins_over_shorter_phrase_and_word() -> None:
    assert parse("delete my stuff").data["expressions:parsed"] == ["delete_partial(me)", "unknown(stuff)"]
    assert parse("delete it").data["expressions:parsed"] == ["delete(*)", "unknown(it)"]


def test_phrase_does_not_match_inside_other_words() -> None:
    assert parse("undelete my accounts").data["expressions:parsed"] == [
        "unknown(undelete)",
        "unknown(my)",
        "unknown(accounts)",
    ]


def test_words_and_regexes_keep_input_order() -> None:
    step = parse("hello 42 hello")
    assert step.data["expressions:parsed"] == ["greeting(hello)", "number(42)", "greeting(hello)"]
    assert step.outputs["expressions"] == "greeting(hello), number(42), greeting(hello)"


def test_regex_star_argument_is_replaced_by_the_matched_token_and_must_match_whole_token() -> None:
    assert parse("order 1234").data["expressions:parsed"] == ["unknown(order)", "number(1234)"]
    assert parse("a12b").data["expressions:parsed"] == ["unknown(a12b)"]


def test_nested_star_in_regex_entry_is_filled() -> None:
    step = parse("x-99", [{"regex": "\\d+", "expressions": "amount(number(*)), seen"}])
    assert step.data["expressions:parsed"] == ["unknown(x)", "amount(number(99))", "seen"]


def test_context_expressions_are_appended_after_parsed_input() -> None:
    step = parse("hello", context={"expressions": "confirm(yes), ticket(7)"})
    assert step.data["expressions:parsed"] == ["greeting(hello)", "confirm(yes)", "ticket(7)"]


def test_invalid_context_expressions_do_not_crash_the_turn() -> None:
    step = parse("hello", context={"expressions": "confirm(yes"})
    assert step.data["expressions:parsed"] == ["greeting(hello)"]
    assert "parser:context_expressions_error" in step.data


def test_empty_input_yields_no_expressions() -> None:
    step = parse("   ")
    assert step.data["expressions:parsed"] == []
    assert step.outputs["expressions"] == ""


def test_missing_dictionaries_make_every_token_unknown() -> None:
    memory = ConversationMemory("c1", current=Step(input="Hi there"))
    parser.run({"type": "parser"}, memory, TurnContext({}, "c1"))
    assert memory.current.data["expressions:parsed"] == ["unknown(hi)", "unknown(there)"]


def test_raw_input_is_left_unchanged_for_templates() -> None:
    assert parse("Hello, World!").input == "Hello, World!"
