#!/usr/bin/env python
"""S4 at full size: the redaction corpus (harnesses/secret_corpus.py) through every entry point.

Prints recall (shapes whose secret is gone at every entry point), false positives (near-misses changed
at any entry point) and, per shape, the time of one ``redact`` (best of 50), then the slowest shape and
the time of a hostile megabyte per shape rule.

    .venv/bin/python bench/redaction_corpus.py
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings")

from harnesses.secret_corpus import NEAR_MISSES, SHAPES
from toolgate.log_redaction import redact_log_text
from toolgate.redaction import redact, redact_headers, redact_json_value

ENTRY_POINTS = {
    "redact": redact,
    "stored-arguments": lambda text: redact(json.dumps({"note": text})),
    "json-walk": lambda text: json.dumps(redact_json_value({"note": text})),
    "header": lambda text: json.dumps(redact_headers({"X-Note": text})),
    "log-record": redact_log_text,
}
HOSTILE = (
    "eyJ",
    "-eyJ",
    "://a:",
    "x://u:p@",
    "-----BEGIN RSA PRIVATE KEY-----",
    "AKIA-",
    "sk-",
    "token=",
    "a",
)


def best_ms(function, argument, repeat: int = 50) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        function(argument)
        best = min(best, time.perf_counter() - started)
    return best * 1000


def main() -> int:
    recalled = 0
    for shape in SHAPES:
        escaped = json.dumps(shape.secret)[1:-1]
        leaks = [
            name
            for name, entry in ENTRY_POINTS.items()
            if shape.secret in entry(shape.text) or escaped in entry(shape.text)
        ]
        recalled += not leaks
        print(
            f"{shape.name:40} {best_ms(redact, shape.text):.4f} ms  {'LEAKS via ' + ', '.join(leaks) if leaks else 'ok'}"
        )
    false_positives = [
        n.name
        for n in NEAR_MISSES
        if any(
            entry(n.text) != expected
            for entry, expected in (
                (redact, n.text),
                (ENTRY_POINTS["log-record"], n.text),
                (lambda t: redact_json_value({"note": t}), {"note": n.text}),
            )
        )
    ]
    slowest = max(SHAPES, key=lambda shape: best_ms(redact, shape.text, 5))
    print(f"slowest shape: {slowest.name} ({best_ms(redact, slowest.text):.4f} ms)")
    for unit in HOSTILE:
        text = unit * (1_000_000 // len(unit))
        print(f"hostile megabyte of {unit!r}: {best_ms(redact, text, 1):.0f} ms")
    with open("/proc/loadavg") as loadavg:
        load = loadavg.read().split()[0]
    print(
        f"recall {recalled}/{len(SHAPES)} shapes ({100 * recalled / len(SHAPES):.0f} %) over {len(ENTRY_POINTS)} "
        f"entry points; false positives {len(false_positives)}/{len(NEAR_MISSES)} near-misses "
        f"{false_positives or ''}; load {load}"
    )
    return 0 if recalled == len(SHAPES) and not false_positives else 1


if __name__ == "__main__":
    raise SystemExit(main())
