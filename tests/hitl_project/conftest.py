"""Metrics tests count into a directory of their own, not the shared var/prometheus.

Other test sessions (and a local ./scripts/start) count into var/prometheus too, which would move
the samples these tests compare. pytest imports this file while collecting, before any test runs.
prometheus_client itself is already imported by then (django-q2 imports it during django.setup()),
in multi-process mode if the settings set PROMETHEUS_MULTIPROC_DIR; but it opens its files only
when the first meter is built, and approvals.metrics builds its meters on the first count. Until
then the directory can still be moved. In single-process mode (settings without the line) it is
left alone: /metrics then reads this process's memory.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

from approvals import metrics
from hitl_project.metrics_setup import ENV_VAR

_multiprocess_mode = ENV_VAR in os.environ or "prometheus_client" not in sys.modules
if _multiprocess_mode and metrics._meters is None:
    _session_dir = tempfile.mkdtemp(prefix="hitl-test-prometheus-")
    os.environ[ENV_VAR] = _session_dir
    atexit.register(shutil.rmtree, _session_dir, ignore_errors=True)
