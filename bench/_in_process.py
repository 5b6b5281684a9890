"""Django in the bench process itself, on a database of its own (bench/audit_ledger_load.py, db_faults.py).

``prepare(db)`` creates the database when missing, sets Django up with the test settings (a fixed audit
key, and sessions that may TRUNCATE the ledger, which the flush needs), migrates and empties it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
PG = "host=127.0.0.1 port=5432 user=postgres"


def prepare(db: str) -> None:
    with psycopg.connect(f"{PG} dbname=postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone():
            conn.execute(f'CREATE DATABASE "{db}"')
    os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{db}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "hitl_project.settings.test"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    call_command("flush", "--noinput", verbosity=0)
