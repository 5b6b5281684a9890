"""The pattern language of tool approvals: validation (in order, with its
messages), matching (``*`` the only wildcard, literal everything else, case-sensitive, full match,
linear time) and the addresses a call is known by."""

from __future__ import annotations

import time

import pytest

from toolgate.patterns import GlobPattern, call_addresses, first_match, validate_pattern

KNOWN = (
    "known sources: builtin, http, mcp, a2a, dynamic, memory, recall; only the http source may be "
    "qualified by method, e.g. 'http.post:'"
)


def illegal(pattern: str) -> str:
    return (
        f"pattern '{pattern}' contains illegal characters — allowed: A-Za-z0-9_-.:* plus / {{ }} for "
        "endpoint paths (tool names never contain spaces)"
    )


def colon(pattern: str) -> str:
    return (
        f"pattern '{pattern}' must not start or end with a colon — the colon separates a source prefix "
        "(e.g. 'mcp:read_*') from the tool name"
    )


def unknown_prefix(prefix: str, pattern: str, suggestion: str | None = None) -> str:
    hint = f" — did you mean '{suggestion}:'?" if suggestion else ""
    return f"unknown tool source prefix '{prefix}:' in pattern '{pattern}'{hint} — {KNOWN}"


def endpoint_unreachable(pattern: str) -> str:
    return (
        f"pattern '{pattern}' targets an endpoint path but its prefix can never match one, so the pattern "
        "matches nothing — endpoint patterns look like 'http.post:<target>'"
    )


def needs_slash(pattern: str, suggestion: str) -> str:
    return (
        f"pattern '{pattern}' is method-qualified, so its target is an endpoint path and must begin with "
        f"'/' (or '*') — did you mean '{suggestion}'?"
    )


# --- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern",
    [
        "delete_account",
        "delete_*",
        "*",
        "mcp:*",
        "mcp:read_*",
        "builtin:calculator",
        "a2a:*",
        "dynamic:*",
        "memory:remember",
        "recall:*",
        "http:*",
        "http.post:*",
        "http.get:/accounts",
        "http.delete:/accounts/{id}",
        "http.post:/administration/{environment}/deploy/{agentId}",
        "http.*:*",
        "*:/agentstore/agents",
        "h*:/x",
        "http.options:*",
        "mcp:server:tool",
        "x" * 256,
    ],
)
def test_valid_patterns_are_accepted(pattern: str) -> None:
    assert validate_pattern(pattern) is None


@pytest.mark.parametrize("pattern", [None, "", "   ", "\t\n"])
def test_blank_pattern_is_refused(pattern: object) -> None:
    assert validate_pattern(pattern) == "pattern must not be blank"


def test_non_string_pattern_is_refused() -> None:
    assert validate_pattern(5) == "pattern must be a string, got number"
    assert validate_pattern(["mcp:*"]) == "pattern must be a string, got array"


def test_pattern_is_capped_at_256_characters() -> None:
    assert validate_pattern("x" * 256) is None
    assert validate_pattern("x" * 257) == "pattern exceeds 256 characters"


def test_length_is_checked_before_characters() -> None:
    assert validate_pattern(" " * 10 + "x" * 250) == "pattern exceeds 256 characters"


@pytest.mark.parametrize(
    "pattern", ["delete account", "delete_?", "delete_[ab]", "a+b", "naïve", "mcp:read_*;", " mcp:*", "a\nb"]
)
def test_illegal_characters_are_refused(pattern: str) -> None:
    assert validate_pattern(pattern) == illegal(pattern)


@pytest.mark.parametrize("pattern", [":delete", "mcp:", "::", ":"])
def test_pattern_must_not_start_or_end_with_a_colon(pattern: str) -> None:
    assert validate_pattern(pattern) == colon(pattern)


def test_typo_in_a_source_prefix_suggests_the_source() -> None:
    assert validate_pattern("mpc:*") == unknown_prefix("mpc", "mpc:*", "mcp")
    assert "did you mean 'mcp:'?" in validate_pattern("mpc:*")
    assert validate_pattern("htp:get_*") == unknown_prefix("htp", "htp:get_*", "http")
    assert validate_pattern("builtn:calc") == unknown_prefix("builtn", "builtn:calc", "builtin")
    assert validate_pattern("recal:*") == unknown_prefix("recal", "recal:*", "recall")


def test_unknown_prefix_far_from_every_source_gets_no_suggestion() -> None:
    assert validate_pattern("slack:post") == unknown_prefix("slack", "slack:post")


def test_only_http_may_be_method_qualified() -> None:
    assert validate_pattern("mcp.post:*") == unknown_prefix("mcp.post", "mcp.post:*")
    assert validate_pattern("a2a.get:/x") == unknown_prefix("a2a.get", "a2a.get:/x")


def test_method_qualifier_is_lower_case_only() -> None:
    assert validate_pattern("http.POST:/x") == unknown_prefix("http.POST", "http.POST:/x")
    assert validate_pattern("http.fetch:/x") == unknown_prefix("http.fetch", "http.fetch:/x")


def test_method_qualified_target_must_be_an_endpoint_path() -> None:
    assert validate_pattern("http.post:agents") == needs_slash("http.post:agents", "http.post:/agents")
    assert validate_pattern("http.get:create_*") == needs_slash("http.get:create_*", "http.get:/create_*")
    assert validate_pattern("http.post:/agents") is None
    assert validate_pattern("http.post:*") is None


@pytest.mark.parametrize("pattern", ["http:/agents", "mcp:/x", "builtin:/calc", "m*:/x"])
def test_endpoint_path_under_a_prefix_that_can_never_be_an_endpoint_is_refused(pattern: str) -> None:
    assert validate_pattern(pattern) == endpoint_unreachable(pattern)


@pytest.mark.parametrize("pattern", ["*:/x", "http*:/x", "*post:/x", "http.*:/x"])
def test_endpoint_path_under_a_wildcard_prefix_that_can_match_a_method_is_accepted(pattern: str) -> None:
    assert validate_pattern(pattern) is None


def test_checks_run_in_the_documented_order() -> None:
    # characters before colons, colons before prefixes
    assert validate_pattern(":a b") == illegal(":a b")
    assert validate_pattern("mpc:") == colon("mpc:")


# --- matching --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("*", "", True),
        ("*", "anything at all", True),
        ("delete_*", "delete_account", True),
        ("delete_*", "delete_", True),
        ("delete_*", "undelete_account", False),
        ("*_account", "delete_account", True),
        ("*_account", "delete_accounts", False),
        ("a*b*c", "abc", True),
        ("a*b*c", "aXbYc", True),
        ("a*b*c", "aXcYb", False),
        ("a*a", "a", False),
        ("a*a", "aa", True),
        ("ab*ba", "aba", False),
        ("**", "", True),
        ("x**y", "xy", True),
        ("*mid*", "amidb", True),
        ("*mid*", "mi", False),
        ("exact", "exact", True),
        ("exact", "exactly", False),
        ("exact", "xexact", False),
        ("http.post:*", "http.post:/agentstore/agents", True),
        ("http.post:*", "http.get:/agentstore/agents", False),
        ("http.*:/accounts/*", "http.delete:/accounts/{id}", True),
    ],
)
def test_glob_matching(pattern: str, text: str, expected: bool) -> None:
    assert GlobPattern(pattern).matches(text) is expected


def test_question_mark_is_a_literal_not_a_wildcard() -> None:
    assert GlobPattern("delete_?").matches("delete_?")
    assert not GlobPattern("delete_?").matches("delete_x")


def test_brackets_are_literals_not_a_character_class() -> None:
    assert GlobPattern("tool[ab]").matches("tool[ab]")
    assert not GlobPattern("tool[ab]").matches("toola")


def test_braces_are_literals_not_a_regex_quantifier() -> None:
    assert GlobPattern("http.post:/agents/{id}").matches("http.post:/agents/{id}")
    assert not GlobPattern("a{2}").matches("aa")
    assert GlobPattern("a{2}").matches("a{2}")


def test_regex_metacharacters_are_literals() -> None:
    assert not GlobPattern("a.c").matches("abc")
    assert GlobPattern("a.c").matches("a.c")
    assert not GlobPattern("a+").matches("aaa")


def test_matching_is_case_sensitive() -> None:
    assert not GlobPattern("Delete_*").matches("delete_account")
    assert not GlobPattern("http.post:/Agents").matches("http.post:/agents")
    assert GlobPattern("Delete_*").matches("Delete_account")


def test_star_matches_across_line_breaks() -> None:
    # a require pattern must never be dodged by an odd character in a name
    assert GlobPattern("*").matches("a\nb")
    assert GlobPattern("a*b").matches("a\n\r\u2028b")


def test_matching_is_linear_where_a_backtracking_regex_explodes() -> None:
    pattern = GlobPattern("*a" * 7 + "*b*a")  # nine stars; a naive ``.*`` regex takes seconds here
    name = "a" * 60
    started = time.perf_counter()
    for _ in range(1000):
        assert not pattern.matches(name)
    assert (time.perf_counter() - started) / 1000 < 0.001


# --- addresses -------------------------------------------------------------------------------------


def test_http_call_is_addressed_by_endpoint_then_source_then_name() -> None:
    assert call_addresses("http", "create_agent", "post:/agentstore/agents") == [
        "http.post:/agentstore/agents",
        "http:create_agent",
        "create_agent",
    ]


def test_endpoint_method_is_lower_cased_and_the_path_keeps_its_case() -> None:
    assert call_addresses("http", "t", "POST:/Agents")[0] == "http.post:/Agents"


def test_absolute_url_endpoint_contributes_only_its_path() -> None:
    assert call_addresses("http", "t", "post:https://api.example.com/agentstore/agents?x=1")[0] == (
        "http.post:/agentstore/agents"
    )
    assert call_addresses("http", "t", "get:http://api.example.com")[0] == "http.get:/"


@pytest.mark.parametrize(
    ("endpoint", "address"),
    [
        ("get:", "http.get:/"),
        ("get:   ", "http.get:/"),
        ("get:accounts", "http.get:/accounts"),
        ("get: /accounts ", "http.get:/accounts"),
        ("delete:/accounts/{id}", "http.delete:/accounts/{id}"),
    ],
)
def test_endpoint_path_is_normalised_to_a_leading_slash(endpoint: str, address: str) -> None:
    assert call_addresses("http", "t", endpoint)[0] == address


def test_unparsable_absolute_url_is_matched_as_declared() -> None:
    assert call_addresses("http", "t", "get:http://[::1")[0] == "http.get:/http://[::1"


def test_http_call_without_endpoint_has_source_and_name_addresses() -> None:
    assert call_addresses("http", "t", None) == ["http:t", "t"]


def test_endpoint_only_counts_for_http_tools() -> None:
    assert call_addresses("mcp", "read_file", "post:/x") == ["mcp:read_file", "read_file"]


def test_unknown_source_has_only_the_bare_name() -> None:
    assert call_addresses("unknown", "delete_account", None) == ["delete_account"]


def test_call_without_a_name_has_no_address() -> None:
    assert call_addresses("http", None, "post:/x") == []


# --- first match -----------------------------------------------------------------------------------


def test_pattern_order_beats_address_order() -> None:
    addresses = call_addresses("http", "create_agent", "post:/agentstore/agents")
    assert first_match(["create_*", "http.post:*"], addresses) == "create_*"
    assert first_match(["http.post:*", "create_*"], addresses) == "http.post:*"


def test_no_pattern_matching_means_none() -> None:
    assert first_match(["mcp:*", "delete_*"], ["http:create", "create"]) is None
    assert first_match([], ["x"]) is None
    assert first_match(["*"], []) is None


def test_blank_patterns_match_nothing() -> None:
    assert first_match(["", "  "], ["", "x"]) is None


def test_source_prefixed_pattern_needs_the_source() -> None:
    assert first_match(["mcp:read_*"], call_addresses("mcp", "read_file", None)) == "mcp:read_*"
    assert first_match(["mcp:read_*"], call_addresses("builtin", "read_file", None)) is None
    assert first_match(["read_*"], call_addresses("unknown", "read_file", None)) == "read_*"
