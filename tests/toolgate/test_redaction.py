"""The one redaction filter (toolgate.outbound.redaction): pure functions, no database."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from toolgate.outbound import http_requests
from toolgate.outbound.redaction import (
    REDACTED,
    is_credential_key,
    is_sensitive_name,
    redact,
    redact_header_value,
    redact_headers,
    redact_json_value,
    redact_query_pairs,
    redact_uri,
    replace_known_secrets,
)

pytestmark = pytest.mark.long

OPENAI_KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv"
ANTHROPIC_KEY = "sk-ant-api03-Zy1xWv4uTs7rQp0oNm3lKj6i"
BEARER = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"


# --- shapes -------------------------------------------------------------------------------------------


def test_openai_key_keeps_its_prefix_and_loses_the_rest() -> None:
    assert redact(f"use {OPENAI_KEY} here") == "use sk-<REDACTED> here"


def test_anthropic_key_keeps_its_prefix_and_loses_the_rest() -> None:
    assert redact(f"use {ANTHROPIC_KEY}.") == "use sk-ant-<REDACTED>."


def test_key_shapes_need_twenty_characters_after_the_prefix() -> None:
    assert redact("sk-" + "a" * 19) == "sk-" + "a" * 19
    assert redact("sk-" + "a" * 20) == "sk-<REDACTED>"


def test_sk_inside_a_word_is_not_a_key() -> None:
    assert redact("task-abcdefghijklmnopqrstuvwxyz") == "task-abcdefghijklmnopqrstuvwxyz"
    assert redact("skeleton crew, risk-assessment-for-the-whole-quarter") == (
        "skeleton crew, risk-assessment-for-the-whole-quarter"
    )


def test_bearer_token_is_redacted_after_the_scheme_word() -> None:
    assert redact(f"Authorization: Bearer {BEARER}") == "Authorization: Bearer <REDACTED>"
    assert redact(f"curl -H 'X-Auth: bearer {BEARER}'") == "curl -H 'X-Auth: bearer <REDACTED>'"


def test_bearer_token_ending_in_another_bearer_does_not_shelter_the_second_token() -> None:
    assert redact(f"Bearer abcdefghijklmnopqr=Bearer {BEARER}") == "Bearer <REDACTED> <REDACTED>"


def test_keys_and_tokens_after_json_escaped_whitespace_in_embedded_json_are_redacted() -> None:
    for text in (f"line one\n{OPENAI_KEY}", f"Authorization:\tBearer\t{BEARER}"):
        redacted = redact(json.dumps({"outer": json.dumps({"inner": text})}))
        assert OPENAI_KEY not in redacted and BEARER not in redacted


def test_short_bearer_word_in_prose_is_left() -> None:
    text = "the Bearer of this letter and a Bearer short-token"
    assert redact(text) == text


def test_marker_is_angle_bracketed_never_square() -> None:
    assert REDACTED == "<REDACTED>"
    assert "[REDACTED]" not in redact(f'{{"api_key": "{OPENAI_KEY}", "t": "Bearer {BEARER}"}}')


# --- credential key names --------------------------------------------------------------------------------


def test_json_credential_value_is_replaced_between_its_quotes_and_stays_valid_json() -> None:
    document = json.dumps({"api_key": "hunter2-hunter2", "access_token": "abcdefghijk", "user": "alice"})
    redacted = redact(document)
    assert json.loads(redacted) == {"api_key": REDACTED, "access_token": REDACTED, "user": "alice"}


def test_json_number_under_a_credential_key_is_quoted_so_the_document_stays_valid() -> None:
    redacted = redact('{"pin_token": 123456789012, "n": 12345678901}')
    assert json.loads(redacted) == {"pin_token": REDACTED, "n": 12345678901}


def test_escaped_quote_json_inside_a_json_string_stays_valid_at_both_levels() -> None:
    inner = json.dumps({"password": 'correct "horse" battery', "ok": "yes"})
    outer = json.dumps({"body": inner, "api_key": OPENAI_KEY})
    redacted = json.loads(redact(outer))
    assert redacted["api_key"] == REDACTED
    assert json.loads(redacted["body"]) == {"password": REDACTED, "ok": "yes"}


def test_doubly_embedded_json_is_redacted_at_its_own_depth() -> None:
    innermost = json.dumps({"client_secret": "s3cr3t-s3cr3t", "note": 'say "hi"'})
    document = json.dumps({"outer": json.dumps({"inner": innermost})})
    level1 = json.loads(redact(document))
    level2 = json.loads(level1["outer"])
    assert json.loads(level2["inner"]) == {"client_secret": REDACTED, "note": 'say "hi"'}


def test_credential_value_ending_in_an_escaped_backslash_is_redacted_whole() -> None:
    document = json.dumps({"password": "ends-with-backslash\\", "next": "kept"})
    assert json.loads(redact(document)) == {"password": REDACTED, "next": "kept"}


def test_form_and_query_text_values_after_credential_names_are_redacted() -> None:
    assert redact("user=bob&password=hunter2222&lang=en") == "user=bob&password=<REDACTED>&lang=en"
    assert redact("token: abcdefgh1234\nnext: line") == f"token: {REDACTED}\nnext: line"
    assert redact("X-Api-Key = 0123456789abcdef; path=/") == f"X-Api-Key = {REDACTED}; path=/"
    assert redact("{:secret => 'abcdefghij'}") == "{:secret => '<REDACTED>'}"


def test_python_repr_with_apostrophes_is_redacted() -> None:
    assert redact("{'apiKey': 'abcdefghijkl', 'x': 1}") == "{'apiKey': '<REDACTED>', 'x': 1}"
    assert redact(repr({"password": "it's a secret"})) == "{'password': \"<REDACTED>\"}"


def test_authorization_scheme_word_is_kept_and_the_credential_after_it_redacted() -> None:
    assert redact("authorization: Basic dXNlcjpwYXNzd29yZA==") == "authorization: Basic <REDACTED>"


def test_unterminated_quoted_credential_runs_to_the_end_of_the_text() -> None:
    assert redact('log: "password": "abcdefghij and more') == 'log: "password": "<REDACTED>'


def test_credential_word_ending_a_json_string_does_not_swallow_the_structure_after_it() -> None:
    for document in (
        {"note": "token:", "n": 123456789},
        {"api_key": ["APIKEY:"]},
        {"api_key": ["APIKEY':", None]},
        {"a": "x password=", "b": "y"},
    ):
        for text in (json.dumps(document), json.dumps({"body": json.dumps(document, indent=2)})):
            assert json.loads(redact(text))


def test_non_secrets_are_untouched() -> None:
    for text in (
        "token_count: 12",
        '{"token_count": 123456789, "max_tokens": 4096000000, "tokens": "many many many"}',
        "skeleton",
        "password=short",
        '{"password": "1234567"}',
        '{"secret": "       "}',
        "Please enter your token to continue",
        '{"token_type": "Bearer", "expires_in": 3600}',
        "",
    ):
        assert redact(text) == text


def test_none_becomes_the_empty_string() -> None:
    assert redact(None) == ""


# --- secret references ----------------------------------------------------------------------------------


def test_whole_vault_reference_stays_legible() -> None:
    for text in (
        '{"api_key": "${vault:OPENAI_API_KEY}"}',
        "password=${vault:db-password}",
        "see ${vault:sk-team-shared-production-key-01}",
    ):
        assert redact(text) == text


def test_unclosed_vault_reference_does_not_shelter_the_text_after_it() -> None:
    assert redact(f'{{"a": "${{vault: {OPENAI_KEY}"}}') == '{"a": "${vault: sk-<REDACTED>"}'


def test_vault_reference_with_more_around_it_is_not_a_whole_reference() -> None:
    assert redact('{"password": "prefix-${vault:x}"}') == '{"password": "<REDACTED>"}'


# --- percent-encoding -------------------------------------------------------------------------------------


def test_percent_encoded_key_is_detected_decoded_and_redacted_in_the_original() -> None:
    assert redact("q=1&api_key=sk-abc%2Ddefghijklmnopqrstuvwxyz") == "q=1&api_key=<REDACTED>"
    encoded = quote(OPENAI_KEY, safe="")
    assert OPENAI_KEY not in redact(f"k={encoded}") and "sk-<REDACTED>" in redact(f"k={encoded}")


def test_whole_percent_encoded_bearer_is_redacted() -> None:
    assert redact(f"auth=Bearer%20{BEARER}&x=1") == "auth=Bearer%20<REDACTED>&x=1"


def test_percent_encoded_json_credential_is_redacted() -> None:
    encoded = quote('{"password":"hunter2222"}', safe="")
    assert redact(encoded) == "%7B%22password%22%3A%22<REDACTED>%22%7D"


# --- idempotence --------------------------------------------------------------------------------------------

FRAGMENTS = st.sampled_from(
    [
        "api_key",
        "API-KEY",
        "apikey",
        "access_token",
        "token",
        "secret",
        "password",
        "authorization",
        "credentials",
        "token_count",
        '"',
        "'",
        "\\",
        '\\"',
        '\\\\\\"',
        ":",
        "=",
        "=>",
        " ",
        "\n",
        ",",
        ";",
        "&",
        "{",
        "}",
        "[",
        "]",
        "%",
        "%2D",
        "%20",
        "%22",
        "%3D",
        "%3A",
        "%7B",
        "sk-",
        "sk-ant-",
        "Bearer ",
        "Basic ",
        "abcdefghij",
        "0123456789",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "-_",
        "./+=",
        "${vault:",
        "${env:X}",
        "${vault:NAME}",
        REDACTED,
        "<",
        ">",
        "task-",
        "é",
        "\u2028",
    ]
)
TEXTS = st.one_of(
    st.lists(st.one_of(FRAGMENTS, st.text(max_size=6)), max_size=30).map("".join),
    st.text(max_size=80),
)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXTS)
def test_redaction_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


def test_a_value_redacted_behind_a_percent_encoded_quote_stays_as_it_is() -> None:
    """Found by the idempotence property: the second pass read ``%22<REDACTED>`` as a new value."""
    once = redact_uri("https://h.example/api_key:%22${vault:")
    assert once == "https://h.example/api_key:%22<REDACTED>" and redact_uri(once) == once


@settings(max_examples=800, deadline=None)
@given(TEXTS)
def test_uri_redaction_is_idempotent(text: str) -> None:
    once = redact_uri("https://h.example/" + text)
    assert redact_uri(once) == once


JSON_KEYS = st.sampled_from(["api_key", "password", "token", "note", "token_count", "x-api-key", "secret"])
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), TEXTS),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(JSON_KEYS, children, max_size=3),
    max_leaves=8,
)


@settings(max_examples=1500, deadline=None)
@given(st.dictionaries(st.one_of(JSON_KEYS, st.text(max_size=5)), JSON_VALUES, max_size=4), st.booleans())
def test_redacted_json_stays_parseable_even_when_embedded_in_a_json_string(document, ascii_only) -> None:
    text = json.dumps(document, ensure_ascii=ascii_only)
    assert isinstance(json.loads(redact(text)), dict)
    embedded = json.dumps({"body": text})
    assert isinstance(json.loads(json.loads(redact(embedded))["body"]), dict)


@settings(max_examples=500, deadline=None)
@given(JSON_VALUES)
def test_json_value_redaction_is_idempotent(value) -> None:
    once = redact_json_value(value)
    assert redact_json_value(once) == once


SECRET_BODIES = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=24
)
SEPARATORS = st.sampled_from([" ", "\n", '"', "'", "=", ":", "(", ",", "%20", "%22"])


@settings(max_examples=1000, deadline=None)
@given(
    TEXTS,
    SEPARATORS,
    st.sampled_from(["sk-", "sk-ant-", "Bearer ", "bearer\t", "Bearer%20"]),
    SECRET_BODIES,
    SEPARATORS,
    TEXTS,
)
def test_no_secret_of_a_known_shape_survives(before, left, prefix, body, right, after) -> None:
    assume(body not in before + after)
    encoded_once = quote(prefix + body, safe="") if "%" not in prefix else prefix + body
    for text in (before + left + prefix + body + right + after, encoded_once):
        assert body not in redact(text)
        assert body not in redact(json.dumps({"a": text}))


# --- headers, query, URI --------------------------------------------------------------------------------


def test_sensitive_names_include_the_spec_list_and_cookie() -> None:
    for name in (
        "Authorization",
        "X-API-Key",
        "api_key",
        "ApiKey",
        "X-Auth-Token",
        "client_secret",
        "X-Credential",
        "X-Password",
        "Cookie",
    ):
        assert is_sensitive_name(name), name
    for name in ("Accept", "Content-Type", "X-Request-Id"):
        assert not is_sensitive_name(name), name


def test_header_is_redacted_by_name() -> None:
    assert redact_header_value("X-Password", "hunter2") == REDACTED
    assert redact_header_value("Authorization", "Bearer x") == REDACTED


def test_header_is_redacted_by_value_when_its_name_says_nothing() -> None:
    assert redact_header_value("X-Client-Auth", f"Bearer {BEARER}") == "Bearer <REDACTED>"
    assert redact_header_value("X-Upstream", OPENAI_KEY) == "sk-<REDACTED>"
    assert redact_header_value("Accept", "application/json") == "application/json"


def test_header_holding_a_whole_vault_reference_stays_legible() -> None:
    assert redact_header_value("Authorization", "${vault:payments-token}") == "${vault:payments-token}"


def test_redact_headers_keeps_names_as_given() -> None:
    headers = {"Authorization": "Bearer abc", "x-trace": "t-1", "X-Client-Auth": f"Bearer {BEARER}"}
    assert redact_headers(headers) == {
        "Authorization": REDACTED,
        "x-trace": "t-1",
        "X-Client-Auth": "Bearer <REDACTED>",
    }


def test_query_pairs_are_redacted_by_name_then_by_value_keeping_repeats() -> None:
    pairs = [("api_key", "abc"), ("q", f"Bearer {BEARER}"), ("tag", "a"), ("tag", "b"), ("password", "")]
    assert redact_query_pairs(pairs) == [
        ("api_key", REDACTED),
        ("q", "Bearer <REDACTED>"),
        ("tag", "a"),
        ("tag", "b"),
        ("password", ""),
    ]


def test_uri_loses_userinfo_and_secret_query_values_but_keeps_scheme_host_and_plain_parts() -> None:
    uri = (
        f"https://bob:pw@api.example.com:8443/v1/keys/{OPENAI_KEY}/x"
        f"?api%5Fkey=abc&q=Bearer%20{BEARER}&limit=10&flag#access_token=abcdefghijk&state=1"
    )
    assert redact_uri(uri) == (
        "https://<REDACTED>@api.example.com:8443/v1/keys/sk-<REDACTED>/x"
        "?api%5Fkey=<REDACTED>&q=Bearer%20<REDACTED>&limit=10&flag#access_token=<REDACTED>&state=1"
    )


def test_plain_uri_is_returned_unchanged() -> None:
    for uri in (
        "http://127.0.0.1:8000/accounts/acc-1/payments",
        "https://h/p?a=1&a=&b",
        "/relative/path",
        "",
    ):
        assert redact_uri(uri) == uri


# --- JSON values and known secrets ---------------------------------------------------------------------


def test_credential_keys_end_in_a_credential_word() -> None:
    assert all(map(is_credential_key, ["api_key", "apiKey", "x-api-key", "refresh_token", "clientSecret"]))
    assert not any(map(is_credential_key, ["token_count", "max_tokens", "secretary", "password_hint"]))


def test_json_value_walk_redacts_under_credential_keys_and_shapes_elsewhere() -> None:
    value = {
        "auth": {
            "client_secret": "abcdefghij",
            "password": "short",
            "token": "${vault:t}",
            "pin_token": 123456789,
        },
        "token_count": 123456789,
        "messages": [f"my key is {OPENAI_KEY}", {"api_key": ["nested-list-value"]}],
        "ok": True,
    }
    assert redact_json_value(value) == {
        "auth": {
            "client_secret": REDACTED,
            "password": "short",
            "token": "${vault:t}",
            "pin_token": REDACTED,
        },
        "token_count": 123456789,
        "messages": ["my key is sk-<REDACTED>", {"api_key": ["nested-list-value"]}],
        "ok": True,
    }


def test_known_secrets_are_replaced_as_written_json_escaped_and_percent_encoded() -> None:
    secret = 'pa"ss word'
    text = json.dumps({"v": secret}) + f" {secret} {quote(secret, safe='')}"
    assert replace_known_secrets(text, [secret, "abc"]) == '{"v": "<REDACTED>"} <REDACTED> <REDACTED>'


def test_known_secret_replacement_prefers_the_longer_secret_and_never_rewrites_the_marker() -> None:
    once = replace_known_secrets("token-1234-extra and DACT", ["token-1234", "token-1234-extra", "DACT"])
    assert once == "<REDACTED> and <REDACTED>"
    assert replace_known_secrets(once, ["DACT", "REDA"]) == once


# --- existing callers and hostile input --------------------------------------------------------------------


def test_http_requests_names_delegate_to_the_one_filter() -> None:
    assert http_requests.REDACTED == REDACTED
    assert http_requests.is_sensitive_name("X-Api-Key")
    assert http_requests.redacted_pairs({"Authorization": "x", "X-Client-Auth": f"Bearer {BEARER}"}) == {
        "Authorization": REDACTED,
        "X-Client-Auth": "Bearer <REDACTED>",
    }
    assert http_requests.redacted_pairs([("token", "abc"), ("q", "1")]) == [["token", REDACTED], ["q", "1"]]


def megabyte_of(unit: str) -> str:
    return unit * (1_000_000 // len(unit))


@pytest.mark.parametrize(
    ("unit", "redacted", "as_a_query"),
    [
        # A key or token swallows every repetition after it: one marker.
        ("sk-", "sk-<REDACTED>", "sk-<REDACTED>"),
        ("sk-ant-", "sk-ant-<REDACTED>", "sk-ant-<REDACTED>"),
        ("token=", "token=<REDACTED>", "token=<REDACTED>"),
        # Nothing here is a secret (no token after "Bearer", values under 8 characters, unclosed
        # references and escapes): the text comes back as it was.
        *(
            (unit, megabyte_of(unit), megabyte_of(unit))
            for unit in ("a", "Bearer ", "a=Bearer ", "Bearer a", '"token": "', '\\"', "\\", "%2", "%2D")
        ),
        ("'password': '", megabyte_of("'password': '"), megabyte_of("'password': '")),
        ("${vault:", megabyte_of("${vault:"), megabyte_of("${vault:")),
        # In a query the first name is the parameter's: a credential name redacts the whole value.
        ('password=a"', megabyte_of('password=a"'), "password=<REDACTED>"),
        ('token="token="', megabyte_of('token="token="'), "token=<REDACTED>"),
        # Each second key is the value of the key before it.
        (
            "api_key:" + " " * 5,
            "api_key:     <REDACTED>     " * 38_461 + "api_key:     ",
            "api_key:     <REDACTED>     " * 38_461 + "api_key:     ",
        ),
        # A reference stays legible, the key or token after it does not, in every repetition.
        (
            "${vault:a} sk-" + "a" * 20 + " ",
            "${vault:a} sk-<REDACTED> " * 28_571,
            "${vault:a} sk-<REDACTED> " * 28_571,
        ),
        (
            "%2D${vault:a}%20Bearer%20" + "b" * 20 + " ",
            "%2D${vault:a}%20Bearer%20<REDACTED> " * 21_739,
            "%2D${vault:a}%20Bearer%20<REDACTED> " * 21_739,
        ),
    ],
)
def test_a_megabyte_of_adversarial_input_returns_redacted(unit: str, redacted: str, as_a_query: str) -> None:
    # Returning at all is the check on backtracking (timings are not asserted: shared machines vary);
    # what comes back is the exact redaction, so a rule that gave up on long input would fail here.
    text = megabyte_of(unit)

    assert redact(text) == redacted
    assert redact_uri("https://h/?" + text) == "https://h/?" + as_a_query
