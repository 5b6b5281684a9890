"""Static gates: bandit finds nothing in the project's code, pip-audit nothing in what is installed.

Both run as subprocesses, the way a developer runs them. Every accepted exception is written down:
bandit's as ``# nosec BXXX  # why`` on the line (or a skip in pyproject's ``[tool.bandit]``, with its
reason), pip-audit's in ``ACCEPTED_VULNERABILITIES`` below, by id, with why. ``manage.py check --deploy``
under the production settings is the third gate: tests/test_deploy_check.py.

pip-audit asks PyPI's vulnerability data over the network. When it cannot (no network, or the index
answers without per-version data), the gate fails and says so: a dependency it could not audit is a
failure, never a silent pass. Because that data is not reachable from every machine the suite runs on
(this project's CI machine serves no per-version JSON and cannot resolve OSV), the pip-audit test carries
the ``registry`` marker, which ./scripts/test leaves out; run it where the registry answers with
``./scripts/audit-deps`` (it fails closed everywhere else).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The project's own code: the Django apps, the project package and manage.py (not tests/, bench/, .venv).
BANDIT_TARGETS = (
    "approval_requests",
    "approvals",
    "clients/python/src",
    "common",
    "conversations",
    "groups",
    "hitl_project",
    "mcp_surface",
    "schedules",
    "slack_surface",
    "toolgate",
    "manage.py",
)
# Known vulnerabilities accepted on purpose: {"GHSA-… or PYSEC-…": "why it does not apply to us"}.
ACCEPTED_VULNERABILITIES: dict[str, str] = {}
# What pip-audit cannot find on PyPI because it is not published there: this project, installed editable.
OWN_DISTRIBUTIONS = {"hitl-service", "hitl-client"}
PIP_AUDIT_TIMEOUT = 240


def bandit_findings(targets: tuple[str, ...] = BANDIT_TARGETS) -> list[str]:
    """Every bandit finding in ``targets`` (relative to the project root), as ``path:line id: text``."""
    result = subprocess.run(
        [sys.executable, "-m", "bandit", "-c", "pyproject.toml", "-r", *targets, "-f", "json", "-q"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise AssertionError(
            f"bandit did not run (exit {result.returncode}): {result.stderr[-2000:]}"
        ) from None
    findings = [
        f"{r['filename']}:{r['line_number']} {r['test_id']} ({r['issue_severity']}): {r['issue_text']}"
        for r in report["results"]
    ]
    errors = [f"{e['filename']}: bandit could not scan it: {e['reason']}" for e in report.get("errors", [])]
    return errors + findings


def pip_audit_problems(*args: str) -> list[str]:
    """What keeps ``pip-audit`` (over the installed environment, or ``args`` such as ``-r file``) from
    passing: each known vulnerability not accepted, and each dependency it could not audit.

    Fails (AssertionError, with pip-audit's own words) when pip-audit cannot run or reach its service."""
    command = [sys.executable, "-m", "pip_audit", "--format", "json", "--progress-spinner", "off"]
    command += ["--timeout", "30", *args]
    try:
        result = subprocess.run(
            command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=PIP_AUDIT_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"pip-audit did not answer within {PIP_AUDIT_TIMEOUT} s: is the vulnerability service (PyPI) reachable?"
        ) from None
    try:
        report: dict[str, Any] = json.loads(result.stdout)
    except json.JSONDecodeError:
        last = "\n".join(result.stderr.strip().splitlines()[-3:])
        raise AssertionError(
            f"pip-audit could not audit (exit {result.returncode}); cannot reach the vulnerability "
            f"service (PyPI)? It said:\n{last}"
        ) from None
    problems = []
    audited = [d for d in report["dependencies"] if "skip_reason" not in d]
    if not audited:
        problems.append(
            f"pip-audit audited none of {len(report['dependencies'])} dependencies: the vulnerability service "
            "(PyPI's per-version JSON) answered none of them, so nothing was checked"
        )
    for dependency in report["dependencies"]:
        name, version = dependency["name"], dependency.get("version", "?")
        if "skip_reason" in dependency:
            if name not in OWN_DISTRIBUTIONS:
                problems.append(f"{name}: not audited: {dependency['skip_reason']}")
            continue
        for vulnerability in dependency.get("vulns", []):
            ids = {vulnerability["id"], *vulnerability.get("aliases", [])}
            if not ids & ACCEPTED_VULNERABILITIES.keys():
                fixed = ", ".join(vulnerability.get("fix_versions", [])) or "none yet"
                problems.append(f"{name} {version}: {vulnerability['id']} (fixed in: {fixed})")
    return problems


def test_bandit_finds_nothing_in_the_projects_code() -> None:
    findings = bandit_findings()

    assert not findings, f"{len(findings)} finding(s):\n" + "\n".join(findings)


@pytest.mark.registry
def test_pip_audit_finds_no_unaccepted_vulnerability_in_the_installed_dependencies() -> None:
    problems = pip_audit_problems()

    assert problems == [], f"{len(problems)} problem(s):\n" + "\n".join(problems[:20])


def test_every_accepted_vulnerability_says_why() -> None:
    assert all(reason.strip() for reason in ACCEPTED_VULNERABILITIES.values())
