"""Database settings: the connection pool is for web processes only, never a forking q-cluster; statements
are bound on the server and prepared per connection unless turned off."""

from __future__ import annotations

from pathlib import Path

import environ

from hitl_project.settings import database


def test_the_pool_is_used_by_web_processes(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("DATABASE_URL", "postgres://u@127.0.0.1:5432/x")
    monkeypatch.setenv("HITL_DB_POOL", "true")
    monkeypatch.setattr(database.sys, "argv", ["uvicorn", "hitl_project.asgi:application"])
    config = database.database_settings(environ.Env(), tmp_path)
    assert config["OPTIONS"]["pool"]["max_size"] == 20 and config["CONN_MAX_AGE"] == 0


def test_a_q_cluster_never_pools_and_keeps_its_connections(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("DATABASE_URL", "postgres://u@127.0.0.1:5432/x")
    monkeypatch.setenv("HITL_DB_POOL", "true")
    monkeypatch.setattr(database.sys, "argv", ["manage.py", "qcluster"])
    config = database.database_settings(environ.Env(), tmp_path)
    assert "pool" not in config.get("OPTIONS", {})
    assert config["CONN_MAX_AGE"] == 60 and config["CONN_HEALTH_CHECKS"] is True


def test_statements_are_bound_on_the_server_and_prepared_by_default(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("DATABASE_URL", "postgres://u@127.0.0.1:5432/x")
    monkeypatch.delenv("HITL_DB_PREPARED", raising=False)
    options = database.database_settings(environ.Env(), tmp_path)["OPTIONS"]
    assert options["server_side_binding"] is True and options["prepare_threshold"] == 2

    monkeypatch.setenv("HITL_DB_PREPARED", "false")  # e.g. behind a pooler in transaction mode
    options = database.database_settings(environ.Env(), tmp_path)["OPTIONS"]
    assert "server_side_binding" not in options and "prepare_threshold" not in options


def test_the_running_database_prepares_what_it_ran_twice(db):
    """The test database runs with the defaults: a statement a connection ran twice is prepared on its third run."""
    from django.db import connection

    from conversations.models import Conversation

    for _ in range(3):
        list(Conversation.objects.filter(state="READY")[:1])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ['%FROM "conversations_conversation"%'],
        )
        assert cursor.fetchone()[0] >= 1
