"""The one redaction filter: whatever may hold a secret passes through here before it is shown or stored.

The marker is ``<REDACTED>`` (never ``[REDACTED]``). Every rule is idempotent, so already redacted
text can be redacted again (re-redaction at serve time with the current filter is the normal case):
``redact(redact(x)) == redact(x)``. Every pattern runs in linear time (possessive quantifiers, no
nested repetition, values scanned once), so a hostile megabyte of input takes well under a second.

Rules of ``redact`` (free text, JSON, form and query text):

- **Key shapes.** Secrets known by their own form (``toolgate.outbound.secret_shapes``): vendor keys after their
  prefix (``sk-<REDACTED>``, ``sk-ant-<REDACTED>``, ``ghp_<REDACTED>``, ``AKIA<REDACTED>``, …; the prefix
  must start a word, so ``task-…`` is no key), JWTs, PEM private key bodies, the password of
  ``scheme://user:password@host``.
- **Bearer tokens.** ``Bearer`` (any case), whitespace (or its JSON escape ``\\t``, ``\\n``, ``\\r``,
  at any depth), ≥ 20 of ``[A-Za-z0-9-_.+/=]`` → ``Bearer <REDACTED>`` (the original spacing is kept).
- **Credential key names.** A key ending in ``api_key``/``api-key``/``apikey``, ``secret_key``,
  ``private_key``, ``access_key``, ``account_key``, ``signing_key`` (``_``, ``-`` or nothing between),
  ``token``, ``secret(s)``, ``password``/``passwd``/``passphrase``, ``authorization``, ``credential(s)`` or
  ``sig`` (an Azure SAS signature) (any case: ``access_token``, ``clientSecret``,
  ``x-api-key``; not ``token_count`` or ``tokens``), optionally closed by a quote (escaped at any depth:
  ``\\"api_key\\"`` inside a JSON string), then ``:``, ``=`` or ``=>``:

  - a quote after the separator that rather closes the string the key sits in (``{"n": "token:"}``:
    it is followed by ``,``, ``}``, ``]``, ``:`` or the end) is not a value;
  - a quoted value runs to its matching quote at the same escaping depth (to the end of the input when
    unterminated; an apostrophe-quoted value also stops at any ``"``) and is replaced between its quotes,
    so JSON stays JSON, however deeply it is embedded in other JSON strings;
  - an unquoted value is the run up to whitespace or one of ``'"\\,;&{}[]``; after a quoted key (a JSON
    number, say) it is replaced by the marker in the key's quotes, so the document stays valid; after an
    authorization scheme word (``Basic``, ``Bearer``, ``Digest``, ``Negotiate``, ``Token``) the
    credential after the word is the value;
  - a value shorter than 8 characters or blank, already ``<REDACTED>``, or a whole secret reference is left.
- **Secret references stay legible.** A whole ``${vault:NAME}`` (also ``${env:NAME}``,
  ``${caller:token}``; NAME of ``[A-Za-z0-9_.:/@-]``) is a name, not a secret; nothing inside one is
  redacted.
- **Percent-encoding.** A run of URL-ish text holding ``%XX`` escapes is also decoded and the rules above
  applied to the decoded form (``api_key%3Dsk-abc%2D…``, ``Bearer%20…``); what they find is replaced in
  the original text (``Bearer%20<REDACTED>``). One level of encoding is decoded.

Structured helpers, each one rule: ``is_sensitive_name`` (header/query names), ``redact_header_value`` and
``redact_headers``, ``redact_query_pairs``, ``redact_uri``, ``is_credential_key`` and ``redact_json_value``
(walk decoded JSON), ``replace_known_secrets`` (the resolved values of secret references).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, quote_plus, unquote_plus

from toolgate.outbound.secret_shapes import shape_spans

REDACTED = "<REDACTED>"
MIN_SECRET_LENGTH = 8
MIN_KNOWN_SECRET_LENGTH = 4
SENSITIVE_NAME_PARTS = (
    "authorization",
    "api-key",
    "api_key",
    "apikey",
    "x-api-key",
    "token",
    "secret",
    "credential",
    "password",
    "cookie",
)

_BEARER_TOKEN = re.compile(r"(?i:bearer)(?:\s|\\++[tnr])++(?P<secret>[A-Za-z0-9\-_.+/=]{20,}+)")
# Factored by first letter: the scan tries one branch per position, not every word.
_CREDENTIAL_WORD = (
    r"(?:a(?:pi[_-]?key|cc(?:ess|ount)[_-]?key|uthorization)|s(?:ecret(?:s|[_-]?key)?+|ig(?:ning[_-]?key)?+)"
    r"|p(?:ass(?:word|wd|phrase)|rivate[_-]?key)|token|credentials?+)"
)
_CREDENTIAL_KEY = re.compile(
    _CREDENTIAL_WORD + r"(?![A-Za-z0-9_-])(?P<keyquote>\\*+[\"'])?+[ \t]*+(?:=>|[:=])[ \t]*+", re.IGNORECASE
)
_CREDENTIAL_KEY_NAME = re.compile(_CREDENTIAL_WORD + r"\Z", re.IGNORECASE)
_UNQUOTED_VALUE = re.compile(r"[^'\"\\\s,;&{}\[\]]++")
_AUTH_SCHEME = re.compile(r"(?:basic|bearer|digest|negotiate|token)[ \t]++", re.IGNORECASE)
_QUOTE = re.compile(r"[\"']")
# Whitespace, raw or JSON-escaped at any depth (``\\n``), then what may follow a JSON string.
_AFTER_A_STRING = re.compile(r"(?:[ \t\r\n]|\\++[nrt])*+(?:[,}\]:]|\Z)")
# A reference names a secret; its name is a plain identifier (no spaces or quotes), so an unclosed
# "${vault:" cannot shelter the text that follows it up to some later "}".
_SECRET_REFERENCE = re.compile(r"\$\{(?:vault|env|caller):[A-Za-z0-9_.:/@-]*+\}")
_URLISH_RUN = re.compile(r"[^\s\"'\\]++")
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
# RFC 3986 appendix B: scheme, authority, path, query, fragment; every URI (and any string) matches.
_URI_PARTS = re.compile(
    r"(?P<scheme>[^:/?#]+:)?(?://(?P<authority>[^/?#]*))?(?P<path>[^?#]*)"
    r"(?:\?(?P<query>[^#]*))?(?:#(?P<fragment>.*))?",
    re.DOTALL,
)


@dataclass(frozen=True)
class _Span:
    """``text[start:end]`` is a secret, to be replaced by ``replacement``."""

    start: int
    end: int
    replacement: str = REDACTED


def redact(text: str | None) -> str:
    """``text`` with every secret the rules of this module recognise replaced by ``<REDACTED>``."""
    if not text:
        return ""
    text = str(text)
    spans = [*_secret_spans(text), *_percent_encoded_spans(text)]
    return _replace_spans(text, spans)


def _secret_spans(text: str) -> list[_Span]:
    spans = [*_key_shape_spans(text), *_bearer_token_spans(text), *_credential_value_spans(text)]
    return _outside_references(text, spans)


def _key_shape_spans(text: str) -> list[_Span]:
    """Secrets known by their form (``toolgate.outbound.secret_shapes``): vendor keys, JWTs, PEM bodies, URL passwords."""
    return [_Span(start, end) for start, end in shape_spans(text)]


def _bearer_token_spans(text: str) -> list[_Span]:
    """``Bearer <≥ 20 token characters>``: the token. The search resumes inside each token, since a token
    may end in another ``…=Bearer`` whose own token follows."""
    spans: list[_Span] = []
    position = 0
    while match := _BEARER_TOKEN.search(text, position):
        spans.append(_Span(match.start("secret"), match.end("secret")))
        position = match.start("secret")
    return spans


def _credential_value_spans(text: str) -> list[_Span]:
    """The values after credential key names (see the module rules); one left-to-right scan."""
    spans: list[_Span] = []
    position = 0
    while match := _CREDENTIAL_KEY.search(text, position):
        span, position = _credential_value(text, match)
        if span is not None:
            spans.append(span)
    return spans


def _credential_value(text: str, key: re.Match[str]) -> tuple[_Span | None, int]:
    """The span to redact after the key (None when the value is left) and where to look for the next key."""
    start = key.end()
    backslashes = _backslash_run_after(text, start)
    opening = start + backslashes
    if opening < len(text) and text[opening] in "\"'" and _is_escape_depth(backslashes):
        if not _opens_a_value(text, key, opening, backslashes):
            return None, opening + 1
        content_start = opening + 1
        content_end, resume = _quoted_value_end(text, content_start, text[opening], backslashes)
        span = _Span(content_start, content_end)
    else:
        scheme = _AUTH_SCHEME.match(text, start)
        value = _UNQUOTED_VALUE.match(text, scheme.end() if scheme else start)
        if value is None:
            return None, start
        key_quote = "" if scheme else key.group("keyquote") or ""
        span = _Span(value.start(), value.end(), key_quote + REDACTED + key_quote)
        resume = value.end()
    return (span if _is_secret_value(text[span.start : span.end]) else None), resume


def _opens_a_value(text: str, key: re.Match[str], opening: int, backslashes: int) -> bool:
    """Whether the quote after a key's separator opens its value rather than closing the string the key
    sits in (``{"note": "token:", "n": 1}``, ``["APIKEY':"]``). The same quote as the key's, equally
    escaped, opens it (a JSON member); one escaped less deeply than the key's closes an enclosing string;
    any other quote closes a string when followed (after whitespace, maybe escaped) by ``,``, ``}``,
    ``]``, ``:`` or the end of the text, since only those may follow a JSON string."""
    key_quote = key.group("keyquote") or ""
    if key_quote and backslashes < len(key_quote) - 1:
        return False
    if key_quote == text[key.end() : opening + 1]:
        return True
    return not _AFTER_A_STRING.match(text, opening + 1)


def _is_escape_depth(backslashes: int) -> bool:
    """Whether a quote behind this many backslashes opens a string at some nesting depth (0, 1, 3, 7, …)."""
    return (backslashes + 1) & backslashes == 0


def _quoted_value_end(text: str, content_start: int, quote_char: str, depth_escapes: int) -> tuple[int, int]:
    """End of a quoted value's content and the position after it.

    A quote behind ``r`` backslashes belongs to the value when ``r mod 2m == 2m - 1`` (``m`` = 1 + the
    opening's backslashes): it is escaped once more than the opening quote. Any other quote of the same
    kind ends the value (the matching quote, or the end of an enclosing string); so does any ``"`` for an
    apostrophe-quoted value. Unterminated values run to the end of the text.
    """
    modulus = 2 * (depth_escapes + 1)
    position = content_start
    while match := _QUOTE.search(text, position):
        found = match.start()
        run = _backslash_run_before(text, found, content_start)
        if match.group() == quote_char and run % modulus == modulus - 1:
            position = found + 1
            continue
        if match.group() == quote_char and run % modulus == depth_escapes:
            return found - depth_escapes, found + 1
        if match.group() == '"' or match.group() == quote_char:
            return found - run, found + 1
        position = found + 1
    return len(text), len(text)


def _backslash_run_after(text: str, position: int) -> int:
    end = position
    while end < len(text) and text[end] == "\\":
        end += 1
    return end - position


def _backslash_run_before(text: str, position: int, floor: int) -> int:
    start = position
    while start > floor and text[start - 1] == "\\":
        start -= 1
    return position - start


def _is_secret_value(value: str) -> bool:
    """Long enough to matter, not blank, not already redacted (also behind a percent-encoded quote, as a
    redacted percent-encoded value reads on the next pass: ``%22<REDACTED>``), not a whole secret
    reference."""
    return (
        len(value) >= MIN_SECRET_LENGTH
        and bool(value.strip())
        and value != REDACTED
        and unquote_plus(value).strip("\"'") != REDACTED
        and not _SECRET_REFERENCE.fullmatch(value)
    )


def _outside_references(text: str, spans: list[_Span]) -> list[_Span]:
    """Drop spans inside a ``${vault:…}``-style reference: it names a secret and stays legible."""
    if not spans or "${" not in text:
        return spans
    references = [(match.start(), match.end()) for match in _SECRET_REFERENCE.finditer(text)]
    starts = [start for start, _ in references]

    def inside_a_reference(span: _Span) -> bool:
        index = bisect_right(starts, span.start) - 1
        return index >= 0 and span.end <= references[index][1]

    return [span for span in spans if not inside_a_reference(span)]


def _percent_encoded_spans(text: str) -> list[_Span]:
    """Secrets found in the decoded form of runs holding ``%XX`` escapes, mapped back onto the original."""
    spans: list[_Span] = []
    for run in _URLISH_RUN.finditer(text):
        if "%" not in run.group() or not _PERCENT_ESCAPE.search(run.group()):
            continue
        decoded, origins = _percent_decode_with_origins(run.group())
        for found in _secret_spans(decoded):
            start = run.start() + origins[found.start][0]
            end = run.start() + origins[found.end - 1][1]
            spans.append(_Span(start, end))
    return spans


def _percent_decode_with_origins(run: str) -> tuple[str, list[tuple[int, int]]]:
    """``run`` with each ``%XX`` decoded to one character, and for each decoded character its source range."""
    characters: list[str] = []
    origins: list[tuple[int, int]] = []
    position = 0
    for escape in _PERCENT_ESCAPE.finditer(run):
        for index in range(position, escape.start()):
            characters.append(run[index])
            origins.append((index, index + 1))
        characters.append(chr(int(escape.group()[1:], 16)))
        origins.append((escape.start(), escape.end()))
        position = escape.end()
    for index in range(position, len(run)):
        characters.append(run[index])
        origins.append((index, index + 1))
    return "".join(characters), origins


def _replace_spans(text: str, spans: list[_Span]) -> str:
    """Replace the spans; overlapping or touching spans become one (a marker next to a marker would
    read as a new value on the next pass and break idempotence)."""
    if not spans:
        return text
    merged: list[_Span] = []
    for span in sorted(spans, key=lambda span: (span.start, -span.end)):
        if merged and span.start <= merged[-1].end:
            last = merged[-1]
            if span.end > last.end:
                merged[-1] = _Span(last.start, span.end)
            continue
        merged.append(span)
    pieces: list[str] = []
    position = 0
    for span in merged:
        pieces.append(text[position : span.start])
        pieces.append(span.replacement)
        position = span.end
    pieces.append(text[position:])
    return "".join(pieces)


def is_sensitive_name(name: str) -> bool:
    """Whether a header or query parameter name suggests a credential: it contains (any case) one of
    ``SENSITIVE_NAME_PARTS`` (``X-Auth-Token``, ``Cookie``, ``client_secret``)."""
    lowered = name.lower()
    return any(part in lowered for part in SENSITIVE_NAME_PARTS)


def redact_header_value(name: str, value: str) -> str:
    """A header or query value: a whole secret reference stays legible; under a sensitive name a
    non-empty value is ``<REDACTED>``; any other value is judged by its shape (``X-Client-Auth: Bearer …``)."""
    if not value or _SECRET_REFERENCE.fullmatch(value):
        return value
    if is_sensitive_name(name):
        return REDACTED
    return redact(value)


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    """A copy of ``headers`` (names as given) with each value through ``redact_header_value``."""
    return {name: redact_header_value(name, value) for name, value in headers.items()}


def redact_query_pairs(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Query parameters (repeats kept, in order), each value judged by its name, then by its shape."""
    return [(name, redact_header_value(name, value)) for name, value in pairs]


def redact_uri(uri: str) -> str:
    """``uri`` with its userinfo replaced by ``<REDACTED>``, query values redacted by (decoded) name and
    by shape, path and fragment by shape; scheme, host and port kept, nothing re-encoded."""
    if not uri:
        return ""
    parts = _URI_PARTS.match(uri)
    assert parts is not None  # every string matches # nosec B101  # type narrowing; the check above already refused it
    pieces = [parts.group("scheme") or ""]
    if parts.group("authority") is not None:
        pieces.append("//" + _redact_authority(parts.group("authority")))
    pieces.append(redact(parts.group("path")))
    if parts.group("query") is not None:
        pieces.append(
            "?" + "&".join(_redact_query_segment(segment) for segment in parts.group("query").split("&"))
        )
    if parts.group("fragment") is not None:
        pieces.append("#" + redact(parts.group("fragment")))
    return "".join(pieces)


def _redact_authority(authority: str) -> str:
    userinfo, at, host = authority.rpartition("@")
    return (REDACTED + at + host) if at and userinfo else authority


def _redact_query_segment(segment: str) -> str:
    name, equals, value = segment.partition("=")
    if not equals:
        return redact(segment)
    decoded_value = unquote_plus(value)
    if value and is_sensitive_name(unquote_plus(name)) and not _SECRET_REFERENCE.fullmatch(decoded_value):
        return name + equals + REDACTED
    return redact(name) + equals + redact(value)


def is_credential_key(name: str) -> bool:
    """Whether a JSON key names a credential: it ends (any case) in one of the credential words of
    ``redact``'s key-name rule (``api_key``, ``private_key``, ``token``,
    ``password``, …), so ``access_token`` is one and ``token_count`` is not."""
    return bool(_CREDENTIAL_KEY_NAME.search(name))


def redact_json_value(value: object) -> object:
    """A copy of decoded JSON: under a credential key a string (or a number) of ≥ 8 characters that is
    not a whole secret reference becomes ``<REDACTED>``; every other string goes through ``redact``."""
    if isinstance(value, dict):
        return {key: _redact_json_member(str(key), item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json_value(item) for item in value]
    if isinstance(value, str):
        return redact(value)
    return value


def _redact_json_member(key: str, value: object) -> object:
    if not is_credential_key(key) or isinstance(value, bool):
        return redact_json_value(value)
    if isinstance(value, str) and _is_secret_value(value):
        return REDACTED
    if isinstance(value, int | float) and len(json.dumps(value)) >= MIN_SECRET_LENGTH:
        return REDACTED
    return redact_json_value(value)


def replace_known_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each known secret value (≥ 4 characters) replaced by
    ``<REDACTED>`` — in every spelling ``encoded_forms`` lists; longer secrets win over their prefixes,
    and an existing marker is never rewritten (idempotent)."""
    if not text:
        return ""
    pattern = known_secrets_pattern(secrets)
    return pattern.sub(REDACTED, text) if pattern is not None else text


# The characters a URL encoder may leave as they are in a path, a query value or a form: each set below
# is one an encoder on a request's way uses (ours for paths and query values, form encoding), so a secret
# echoed back in any of them is still recognised.
_ENCODER_SAFE_SETS = ("", "/", "-._~!$&'()*+,;=:@", "-._~!$&'()*+,;=:@/[]", "-._~!$'()*,;:@/?")
# The WHATWG URL standard's percent-encode sets, which httpx applies to whatever a URL string holds: a path
# keeps every printable ASCII character but space " # < > ? ` { }, a query every one but space " # < >,
# and both keep an existing %XX escape as it is.
_PRINTABLE = "".join(chr(code) for code in range(0x21, 0x7F))
_WHATWG_SAFE_SETS = (
    "".join(c for c in _PRINTABLE if c not in '"#<>?`{}%'),
    "".join(c for c in _PRINTABLE if c not in '"#<>%'),
)
_PERCENT_HEX = re.compile(r"%[0-9A-F]{2}")
_PERCENT_ESCAPE_ANY_CASE = re.compile(r"(%[0-9A-Fa-f]{2})")


def encoded_forms(secret: str) -> set[str]:
    """Every spelling of ``secret`` a request or its echo may carry: as written; JSON-escaped (with and
    without ``\\uXXXX`` escapes); percent-encoded by each encoder's safe set, form-encoded (``+`` for a
    space), and as httpx encodes what a URL holds (``_WHATWG_SAFE_SETS``); and each percent-encoded form
    with lower-case hex digits too."""
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote_plus(secret),
    }
    forms |= {quote(secret, safe=safe) for safe in _ENCODER_SAFE_SETS}
    forms |= {_quote_keeping_escapes(secret, safe) for safe in _WHATWG_SAFE_SETS}
    forms |= {_PERCENT_HEX.sub(lambda escape: escape.group().lower(), form) for form in forms if "%" in form}
    return forms


def _quote_keeping_escapes(text: str, safe: str) -> str:
    """``quote`` that leaves an existing ``%XX`` escape as it is (a lone ``%`` becomes ``%25``)."""
    return "".join(
        piece if _PERCENT_ESCAPE_ANY_CASE.fullmatch(piece) else quote(piece, safe=safe)
        for piece in _PERCENT_ESCAPE_ANY_CASE.split(text)
    )


def known_secrets_pattern(secrets: Iterable[str]) -> re.Pattern[str] | None:
    """The pattern ``replace_known_secrets`` uses (None when no secret is long enough), to compile once."""
    forms = {
        form
        for secret in secrets
        if secret and len(secret) >= MIN_KNOWN_SECRET_LENGTH
        for form in encoded_forms(secret)
    }
    if not forms:
        return None
    alternatives = [REDACTED, *sorted(forms, key=len, reverse=True)]
    return re.compile("|".join(re.escape(form) for form in alternatives))
