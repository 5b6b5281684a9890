"""Where prometheus_client keeps the metric files that every process on this host writes and /metrics sums.

prometheus_client decides once, when it is first imported, whether to count in memory or in files
under PROMETHEUS_MULTIPROC_DIR; the settings call configure_multiprocess_dir() so every process
(uvicorn workers, q-cluster workers, manage.py) decides the same. This module must not import
prometheus_client. The start script empties the directory before it starts the processes:

    python -m hitl_project.metrics_setup wipe
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

ENV_VAR = "PROMETHEUS_MULTIPROC_DIR"


def configure_multiprocess_dir(base_dir: Path) -> Path:
    """PROMETHEUS_MULTIPROC_DIR if set, else <base_dir>/var/prometheus; created, absolute, exported."""
    path = Path(os.environ.get(ENV_VAR) or Path(base_dir) / "var" / "prometheus").resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ImproperlyConfigured(
            f"{ENV_VAR}: cannot create {path} ({exc}); point it at a writable directory"
        ) from exc
    # Children (q-cluster workers, uvicorn workers) inherit it, whatever their working directory.
    os.environ[ENV_VAR] = str(path)
    return path


def wipe_multiprocess_dir(path: Path | str) -> int:
    """Delete the metric files of earlier runs; returns how many. Only while no process writes to them:
    a process keeps writing into a file deleted under it, and those counts are lost from /metrics."""
    removed = 0
    for file in Path(path).glob("*.db"):
        file.unlink(missing_ok=True)
        removed += 1
    return removed


def _configured_dir() -> Path:
    # The settings decide (.env, DJANGO_SETTINGS_MODULE); importing them does not start Django.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings.base")
    from django.conf import settings

    configured = getattr(settings, "PROMETHEUS_MULTIPROC_DIR", None)
    if configured:
        return Path(configured)
    return configure_multiprocess_dir(Path(__file__).resolve().parent.parent)


def main(argv: list[str]) -> int:
    if argv != ["wipe"]:
        print("usage: python -m hitl_project.metrics_setup wipe", file=sys.stderr)
        return 2
    path = _configured_dir()
    removed = wipe_multiprocess_dir(path)
    print(f"metrics: removed {removed} file(s) from {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
