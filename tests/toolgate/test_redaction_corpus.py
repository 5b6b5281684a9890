"""S4: every secret shape of the corpus loses its secret through every redaction entry point, and no
near-miss is touched. Entry points: ``redact`` (free text), the stored arguments of a gated call
(``redact`` of the arguments' JSON, as ``toolgate.batches`` stores them), ``redact_json_value`` (the
decoded-JSON walk of REST views), ``redact_headers`` and every log record (the record factory of
``toolgate.log_redaction``)."""

from __future__ import annotations

import json
import logging

import pytest

from harnesses.secret_corpus import NEAR_MISSES, SHAPES, NearMiss, Shape
from toolgate.log_redaction import install
from toolgate.redaction import REDACTED, redact, redact_headers, redact_json_value
from toolgate.secret_shapes import VENDOR_KEYS

logger = logging.getLogger("tests.redaction_corpus")


def _stored_arguments(text: str) -> str:
    return redact(json.dumps({"note": text, "amount": 1}))


def _walked_json(text: str) -> str:
    return json.dumps(redact_json_value({"note": text, "nested": [{"memo": text}]}))


def _header(text: str) -> str:
    return json.dumps(redact_headers({"X-Note": text}))


ENTRY_POINTS = {
    "redact": redact,
    "stored-arguments": _stored_arguments,
    "json-walk": _walked_json,
    "header": _header,
}


def _logged(caplog, text: str) -> str:
    install()  # the toolgate app's ready() did it; idempotent
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="tests.redaction_corpus"):
        logger.debug("tool call arguments: %s", text)
    (record,) = caplog.records
    return record.getMessage()


def test_the_corpus_has_the_size_the_issue_asks():
    assert len(SHAPES) >= 60 and len(NEAR_MISSES) >= 20
    assert len({shape.name for shape in SHAPES}) == len(SHAPES)
    assert all(len(shape.secret) >= 8 and shape.secret in shape.text for shape in SHAPES)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.name)
def test_every_secret_shape_loses_its_secret_at_every_entry_point(shape: Shape, caplog):
    escaped = json.dumps(shape.secret)[1:-1]
    outputs = {name: entry(shape.text) for name, entry in ENTRY_POINTS.items()}
    outputs["log-record"] = _logged(caplog, shape.text)
    for name, output in outputs.items():
        assert shape.secret not in output and escaped not in output, f"{shape.name} survives {name}: {output}"
        assert REDACTED in output, f"{shape.name} through {name}"
    once = outputs["redact"]
    assert redact(once) == once, f"{shape.name}: redaction is not idempotent"


@pytest.mark.parametrize("near_miss", NEAR_MISSES, ids=lambda near_miss: near_miss.name)
def test_no_near_miss_is_redacted_at_any_entry_point(near_miss: NearMiss, caplog):
    text = near_miss.text
    assert redact(text) == text
    assert _stored_arguments(text) == json.dumps({"note": text, "amount": 1})
    assert redact_json_value({"note": text}) == {"note": text}
    assert redact_headers({"X-Note": text}) == {"X-Note": text}
    assert _logged(caplog, text) == f"tool call arguments: {text}"


def test_every_vendor_rule_has_a_shape_in_the_corpus():
    """A rule without an example could be dropped unnoticed; the corpus names each vendor it covers."""
    named = {shape.name for shape in SHAPES}
    for vendor, _, _ in VENDOR_KEYS:
        assert any(name.startswith(vendor) for name in named), vendor


def _megabyte_of(unit: str) -> str:
    return unit * (1_000_000 // len(unit))


@pytest.mark.parametrize(
    ("unit", "redacted"),
    [
        # Prefixes without a body, bodies that never close, URL authorities that never reach "@":
        # returning at all is the check on backtracking (no timing is asserted), and nothing changes.
        *(
            (unit, _megabyte_of(unit))
            for unit in ("eyJ", "eyJa.", "://a:", "://:", "ghp_", "SG.a", "AKIA-", "xAKIA")
        ),
        ("-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN RSA PRIVATE KEY-----" + REDACTED),
        ("-----BEGIN X-----", _megabyte_of("-----BEGIN X-----")),
        ("x://u:p@", ("x://u:" + REDACTED + "@") * (1_000_000 // 8)),
    ],
)
def test_a_megabyte_of_adversarial_input_for_the_shape_rules_returns(unit: str, redacted: str):
    assert redact(_megabyte_of(unit)) == redacted
