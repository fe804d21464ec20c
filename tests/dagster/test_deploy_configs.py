"""The deployment profiles in deploy/ are valid Dagster configuration, checked against Dagster's own schemas.

Docker and Kubernetes cannot run on our machines (no engine, no cluster): these checks are what can be proven
here. The cluster profile (Postgres + Celery) also runs for real in tests/integration/test_cluster.py.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml
from dagster._config import validate_config
from dagster._core.instance.config import dagster_instance_config_schema

from ragloom.settings import REPO_ROOT, Settings

DEPLOY = REPO_ROOT / "deploy"
INSTANCES = [DEPLOY / "cluster" / "dagster.yaml", DEPLOY / "docker" / "dagster.yaml", DEPLOY / "k8s" / "dagster.yaml",
             REPO_ROOT / "dagster.yaml"]


def _errors(result) -> list[str]:
    return [e.message for e in result.errors or []]


@pytest.mark.parametrize("path", INSTANCES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_instance_yaml_matches_dagster_schema(path: Path):
    config = yaml.safe_load(path.read_text())
    result = validate_config(dagster_instance_config_schema(), config)
    assert result.success, _errors(result)
    launcher = config.get("run_launcher")
    if launcher:  # the launcher's own config, against the launcher class's schema
        cls = getattr(importlib.import_module(launcher["module"]), launcher["class"])
        result = validate_config(cls.config_type(), launcher.get("config", {}))
        assert result.success, _errors(result)


def test_schema_check_catches_a_wrong_launcher_field():
    config = yaml.safe_load((DEPLOY / "k8s" / "dagster.yaml").read_text())
    from dagster_k8s import K8sRunLauncher

    bad = {**config["run_launcher"]["config"], "job_namespce": "typo"}
    assert not validate_config(K8sRunLauncher.config_type(), bad).success


def test_postgres_storage_uses_psycopg2_scheme():
    for path in INSTANCES[:3]:
        storage = yaml.safe_load(path.read_text())["storage"]["postgres"]["postgres_db"]
        assert storage["scheme"] == "postgresql+psycopg2", path  # SQLAlchemy 2.1 maps postgresql:// to psycopg 3


def test_cluster_workspace_points_at_the_code_server():
    workspace = yaml.safe_load((DEPLOY / "cluster" / "workspace.yaml").read_text())
    server = workspace["load_from"][0]["grpc_server"]
    assert server["port"] == Settings().code_server_port and server["location_name"] == "ragloom"


def test_executor_setting_selects_celery_with_a_valid_config(monkeypatch):
    from dagster_celery import celery_executor

    from pipelines.definitions import executor_for

    assert executor_for(Settings(executor="celery")).name == "celery"
    assert executor_for(Settings()).name == "in_process"
    assert executor_for(Settings(executor="multiprocess")).name == "multiprocess"
    config = {"broker": {"env": "RAGLOOM_CELERY_BROKER"}, "backend": {"env": "RAGLOOM_CELERY_BACKEND"}}
    assert validate_config(celery_executor.config_schema.config_type, config).success
