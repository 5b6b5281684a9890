"""Database settings: the connection pool is for web processes only, never a forking q-cluster."""

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
