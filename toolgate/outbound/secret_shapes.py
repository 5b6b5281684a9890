"""Secrets known by their own form, wherever they stand: vendor key prefixes, JWTs, PEM private keys,
passwords in URLs. ``toolgate.outbound.redaction`` applies these beside its context rules (Bearer, credential keys).

Rules (each finds the characteristic part; the prefix that names the vendor stays legible):

- **Vendor keys.** A prefix that starts a word (a JSON escape such as ``\\n`` counting as a word break),
  then a run of the vendor's alphabet at least as long as its shortest real key: OpenAI ``sk-``/``sk-proj-``,
  Anthropic ``sk-ant-``, AWS ``AKIA``/``ASIA``, GitHub ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/
  ``github_pat_``, GitLab ``glpat-`` (and its other token kinds), Slack ``xoxb-``/``xoxp-``/``xapp-`` and
  webhook paths, Stripe ``sk_live_``/``rk_live_``/``whsec_``, Google ``AIza``/``GOCSPX-``/``ya29.``,
  SendGrid ``SG.``, npm ``npm_``, PyPI ``pypi-``, Hugging Face ``hf_``, DigitalOcean, Shopify, Databricks.
  Publishable keys (``pk_live_``) are not secrets and are left.
- **JWTs.** ``eyJ`` + three dot-separated runs of ≥ 8 base64url characters: all after ``eyJ``.
- **PEM private keys.** The body between ``-----BEGIN … PRIVATE KEY…-----`` and the next ``-----END``
  (to the end of the text when there is none); public keys and certificates are left.
- **Passwords in URLs.** ``scheme://user:password@host``: the password (any length).

Every pattern is a literal prefix and possessive runs of one class, and the PEM scan resumes after each
body, so each rule is linear in the text; none matches its own ``<REDACTED>`` output (idempotent).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

REDACTED = "<REDACTED>"  # toolgate.outbound.redaction.REDACTED (that module imports this one)


# A key starts a word: after a non-alphanumeric or a JSON escape (``\nsk-…``), never inside ``task-…``.
KEY_START = r"(?:(?<![A-Za-z0-9])|(?<=\\[bfnrt])|(?<=\\u[0-9A-Fa-f]{4}))"

_B64URL = "[A-Za-z0-9_-]"
_ALNUM = "[A-Za-z0-9]"

# (vendor, prefix, body): the body is the secret; the prefix is a regular expression of literals.
VENDOR_KEYS: tuple[tuple[str, str, str], ...] = (
    ("anthropic", r"sk-ant-", _B64URL + "{20,}+"),
    ("openai", r"sk-(?!ant-" + _B64URL + "{20})", _B64URL + "{20,}+"),
    ("aws-access-key-id", r"(?:AKIA|ASIA|ABIA|ACCA)", "[0-9A-Z]{16,}+"),
    ("github", r"gh[pousr]_", _ALNUM + "{36,}+"),
    ("github-fine-grained", r"github_pat_", "[A-Za-z0-9_]{22,}+"),
    ("gitlab", r"gl(?:pat|dt|rt|ptt|cbt|oas|soat|ft)-", _B64URL + "{20,}+"),
    ("slack", r"xox[abposre]-", "[A-Za-z0-9-]{10,}+"),
    ("slack-app", r"xapp-", "[A-Za-z0-9-]{10,}+"),
    ("slack-webhook", r"hooks\.slack\.com/services/", "[A-Za-z0-9/]{20,}+"),
    ("stripe", r"(?:sk|rk)_(?:live|test)_", _ALNUM + "{16,}+"),
    ("stripe-webhook", r"whsec_", _ALNUM + "{24,}+"),
    ("google-api-key", r"AIza", _B64URL + "{30,}+"),
    ("google-oauth-client-secret", r"GOCSPX-", _B64URL + "{20,}+"),
    ("google-oauth-access-token", r"ya29\.", _B64URL + "{20,}+"),
    ("sendgrid", r"SG\.", _B64URL + "{16,}+\\." + _B64URL + "{16,}+"),
    ("npm", r"npm_", _ALNUM + "{36,}+"),
    ("pypi", r"pypi-", _B64URL + "{50,}+"),
    ("huggingface", r"hf_", _ALNUM + "{30,}+"),
    ("digitalocean", r"do[opr]_v1_", "[a-f0-9]{64,}+"),
    ("shopify", r"shp(?:at|ca|pa|ss)_", "[a-fA-F0-9]{32,}+"),
    ("databricks", r"dapi", "[a-f0-9]{32,}+"),
)
# One alternation, so the text is scanned once (a pattern per vendor, each led by a look-behind, took
# 22 passes: 7 s for a hostile megabyte); the word start is checked on each candidate instead.
_VENDOR_KEY = re.compile(
    "|".join(f"(?:{prefix})(?P<s{index}>{body})" for index, (_, prefix, body) in enumerate(VENDOR_KEYS))
)
_WORD_START = re.compile(KEY_START)
_JWT = re.compile(r"eyJ(?P<secret>[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+)")
_JWT_SEGMENT = re.compile(r"[A-Za-z0-9_-]*+")
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]++")
_PEM_BEGIN = re.compile(r"-----BEGIN (?P<label>[A-Z0-9 ]{0,60}+)-----")
_PEM_END = "-----END"
# The password of ``scheme://user:password@``: neither part holds whitespace, a quote, ``/``, ``?`` or ``#``.
_URL_PASSWORD = re.compile(r"://[^\s/@:?#\"'\\]*+:(?P<secret>[^\s/@?#\"'\\]++)@")


def shape_spans(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of every secret these rules find (overlaps possible; the caller merges them)."""
    yield from _vendor_keys(text)
    yield from _jwts(text)
    yield from _pem_bodies(text)
    if "://" in text:
        for match in _URL_PASSWORD.finditer(text):
            if match.group("secret") != REDACTED:
                yield match.start("secret"), match.end("secret")


def _vendor_keys(text: str) -> Iterator[tuple[int, int]]:
    """Each vendor key that starts a word. A candidate inside a word is skipped with the rest of its
    alphanumeric run (no later start in that run can begin a word), so the scan stays one pass."""
    position = 0
    while match := _VENDOR_KEY.search(text, position):
        start = match.start()
        if _WORD_START.match(text, start):
            group = match.lastgroup or ""
            yield match.start(group), match.end(group)
            position = match.end()
        else:
            run = _ALNUM_RUN.match(text, start)
            position = max(run.end() if run else start, start + 1)


def _jwts(text: str) -> Iterator[tuple[int, int]]:
    """Each JWT that starts a word. A failed candidate is skipped with its whole first segment: a later
    ``eyJ`` in it has a shorter first segment and the same others, so it fails too (one pass; a regex
    alternative would rescan the segment from every ``eyJ`` in it)."""
    position = 0
    while (start := text.find("eyJ", position)) >= 0:
        if not _WORD_START.match(text, start):
            run = _ALNUM_RUN.match(text, start)
            position = max(run.end() if run else start, start + 1)
        elif match := _JWT.match(text, start):
            yield match.start("secret"), match.end("secret")
            position = match.end()
        else:
            segment = _JWT_SEGMENT.match(text, start)
            position = max(segment.end() if segment else start, start + 1)


def _pem_bodies(text: str) -> Iterator[tuple[int, int]]:
    """The body of each private key block; the search resumes after the body, so it is one pass."""
    if "-----BEGIN " not in text:
        return
    position = 0
    while match := _PEM_BEGIN.search(text, position):
        position = match.end()
        if "PRIVATE KEY" not in match.group("label"):
            continue
        end = text.find(_PEM_END, position)
        end = len(text) if end < 0 else end
        if text[position:end] not in ("", REDACTED):
            yield position, end
        position = end
