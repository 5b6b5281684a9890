"""Read GET /metrics the way Prometheus does, and compare two reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

REPO_ROOT = Path(__file__).resolve().parents[2]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: APIClient | None = None) -> Samples:
    response = (client or APIClient()).get("/metrics")
    assert response.status_code == 200, response.content
    samples: Samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before: Samples, after: Samples, prefix: str = "") -> dict[tuple[str, frozenset], float]:
    """The samples whose value changed between two reads (a new sample counts from 0)."""
    return {
        key: after[key] - before.get(key, 0.0)
        for key in after
        if key[0].startswith(prefix) and after[key] != before.get(key, 0.0)
    }


def run_in_process(code: str, multiproc_dir: Path) -> subprocess.Popen:
    """A separate Python process that shares only the metrics directory with this one."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(multiproc_dir)}
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, env=env)


def finish(*processes: subprocess.Popen) -> None:
    for process in processes:
        assert process.wait(timeout=60) == 0
