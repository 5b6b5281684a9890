"""Which tests a run selects: the opt-in markers (fullsize, registry) stay out of a run whose ``-m`` does
not name them, so selecting with ``-m 'not browser'`` does not bring the full-size harnesses back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import opted_in_markers

ROOT = Path(__file__).resolve().parent.parent
FULLSIZE = "tests/test_api_contract.py::test_full_api_contract"
FAST = "tests/test_api_contract.py::test_every_operation_answers_as_its_schema_says_for_every_role"


def collected(*args: str) -> list[str]:
    # addopts' -q makes --collect-only print one node id a line
    run = subprocess.run(  # this interpreter's pytest on a file of the suite
        [sys.executable, "-m", "pytest", "--collect-only", "-p", "no:xdist", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    return [line for line in run.stdout.splitlines() if "::" in line]


def test_a_user_marker_expression_does_not_bring_the_fullsize_tests_back():
    ids = collected("-m", "not browser", "tests/test_api_contract.py")

    assert FAST in ids
    assert FULLSIZE not in ids


def test_fullsize_tests_are_left_out_without_an_expression_and_run_when_it_names_them():
    assert FULLSIZE not in collected("tests/test_api_contract.py")
    assert collected("-m", "fullsize", "tests/test_api_contract.py") == [FULLSIZE]


@pytest.mark.parametrize(
    ("markexpr", "opted"),
    [
        ("", set()),
        ("not browser", set()),
        ("fullsize", {"fullsize"}),
        ("registry", {"registry"}),
        ("not fullsize and not registry", {"fullsize", "registry"}),
        ("fullsize_like", set()),
    ],
)
def test_only_an_expression_that_names_an_opt_in_marker_opts_in(markexpr, opted):
    assert opted_in_markers(markexpr) == opted
