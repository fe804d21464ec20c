"""Where the cluster profile's Postgres keeps its data (ragloom.stack.cluster.postgres_dir)."""

from __future__ import annotations

from pathlib import Path

from ragloom.settings import Settings
from ragloom.stack import cluster


def _settings(monkeypatch, data_dir) -> Settings:
    monkeypatch.setenv("RAGLOOM_DATA_DIR", str(data_dir))
    return Settings.from_env()


def test_as_root_each_data_directory_gets_its_own_postgres_cluster(monkeypatch, tmp_path):
    """The generated password lives in the data directory: a wiped or second data directory must initialise
    its own cluster, never meet one that an earlier password protects (a cold CI run on a used machine did)."""
    monkeypatch.setattr(cluster.os, "geteuid", lambda: 0)
    first = cluster.postgres_dir(_settings(monkeypatch, tmp_path / "a"))
    again = cluster.postgres_dir(_settings(monkeypatch, tmp_path / "a"))
    second = cluster.postgres_dir(_settings(monkeypatch, tmp_path / "b"))
    assert first == again
    assert first != second
    assert first.parent == second.parent == Path("/var/lib/ragloom")
    assert first.name.startswith("postgres-")


def test_not_as_root_postgres_lives_in_the_stack_directory(monkeypatch, tmp_path):
    monkeypatch.setattr(cluster.os, "geteuid", lambda: 1000)
    settings = _settings(monkeypatch, tmp_path / "a")
    assert cluster.postgres_dir(settings) == settings.stack_dir / "postgres"
