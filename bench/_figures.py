"""The figures every bench prints: latency percentiles of its samples, and the machine it ran on."""

from __future__ import annotations

import math
import os
import platform
import statistics
from collections.abc import Sequence
from pathlib import Path


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """Latency figures of ``samples`` (seconds) in milliseconds: count, mean, p50, p95, p99, max.

    Percentiles by nearest rank on the sorted samples (the value below which that share of the
    samples fall), so p99 of 300 samples is the 297th smallest, an observed latency.
    """
    values = sorted(samples)
    count = len(values)
    if count == 0:
        return {
            "count": 0,
            "mean": math.nan,
            "p50": math.nan,
            "p95": math.nan,
            "p99": math.nan,
            "max": math.nan,
            "min": math.nan,
        }

    def rank(p: float) -> float:
        return values[min(count - 1, max(0, math.ceil(p / 100 * count) - 1))] * 1000

    return {
        "count": count,
        "mean": statistics.fmean(values) * 1000,
        "min": values[0] * 1000,
        "p50": rank(50),
        "p95": rank(95),
        "p99": rank(99),
        "max": values[-1] * 1000,
    }


def format_latency(label: str, samples: Sequence[float]) -> str:
    s = summarize(samples)
    return (
        f"{label}: n={s['count']}  p50={s['p50']:.1f} ms  p95={s['p95']:.1f} ms  "
        f"p99={s['p99']:.1f} ms  mean={s['mean']:.1f} ms  max={s['max']:.1f} ms"
    )


def print_latency(label: str, samples: Sequence[float]) -> None:
    print(format_latency(label, samples), flush=True)


def machine_line() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"machine: {os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"
