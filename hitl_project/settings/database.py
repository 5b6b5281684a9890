"""Which database to use: DATABASE_URL, else a local PostgreSQL if one answers, else SQLite (loudly)."""

import socket
import sys
from pathlib import Path
from typing import Any

import environ

LOCAL_POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/hitl"


def local_postgres_answers(host: str = "127.0.0.1", port: int = 5432) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def running_qcluster(argv: list[str] | None = None) -> bool:
    """django-q2 forks its worker processes: a connection pool opened before the fork would be shared."""
    return "qcluster" in (argv if argv is not None else sys.argv)


def database_settings(env: environ.Env, base_dir: Path) -> dict[str, Any]:
    url = env.str("DATABASE_URL", default="")
    if not url:
        if local_postgres_answers():
            url = LOCAL_POSTGRES_URL
        else:
            url = f"sqlite:///{base_dir / 'var' / 'hitl.sqlite3'}"
            print(
                "WARNING: no DATABASE_URL and no PostgreSQL on 127.0.0.1:5432 - using SQLite "
                "(try-it-out only: no row locks, no audit trigger, no real concurrency).",
                file=sys.stderr,
            )
            (base_dir / "var").mkdir(exist_ok=True)
    config = environ.Env.db_url_config(url)
    if config["ENGINE"] == "django.db.backends.postgresql":
        options = config.setdefault("OPTIONS", {})
        # django-environ turns ?pool=true into the string 'true', which breaks the pool: decide in code.
        options.pop("pool", None)
        if env.bool("HITL_DB_PREPARED", default=True):
            # Server-side binding, and psycopg prepares a statement a connection has run twice:
            # PostgreSQL then parses and plans the hot path's statements once per connection, not per
            # execution (docs/operations.md). Off for a pooler in transaction mode without prepared statements.
            options["server_side_binding"] = True
            options["prepare_threshold"] = env.int("HITL_DB_PREPARE_THRESHOLD", default=2)
        if running_qcluster():
            # Never pool in a q-cluster (forked processes would share connections); keep each worker's
            # connection open between tasks instead of reconnecting for every task.
            config["CONN_MAX_AGE"] = env.int("HITL_Q_CONN_MAX_AGE", default=60)
            config["CONN_HEALTH_CHECKS"] = True
        elif env.bool("HITL_DB_POOL", default=False):
            options["pool"] = {"min_size": 2, "max_size": env.int("HITL_DB_POOL_MAX", default=20)}
            config["CONN_MAX_AGE"] = 0
    return config
