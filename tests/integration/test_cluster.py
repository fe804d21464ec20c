"""The cluster profile on loopback, real processes only: Postgres run storage, Redis, two Celery workers, a
3-node Weaviate with replication factor 3, Neo4j through a neo4j:// routing URI.

The profile is its own world (its Weaviate nodes, graph namespace `ragloom_cluster`, artifacts folder), so these
tests clear it at the start instead of using per-test names: the Celery workers are long-lived processes whose
resources come from their environment, not from the test's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from ragloom import stack
from ragloom.settings import REPO_ROOT, Settings
from ragloom.stack import cluster, weaviate_cluster

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def profile(settings: Settings) -> Iterator[Settings]:
    """The running cluster profile (stopped after this module: it costs memory the rest of the suite wants)."""
    started = cluster.up(stack.up(settings))
    yield started
    cluster.down(started)


def _env(profile: Settings) -> dict[str, str]:
    return {**os.environ, **cluster.client_env(profile), "PYTHONPATH": str(REPO_ROOT)}


def _cluster_settings(profile: Settings) -> Settings:
    saved = os.environ.copy()
    try:
        os.environ.update(cluster.client_env(profile))
        return Settings.from_env()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _clear_profile(profile: Settings) -> None:
    """Empty the profile's Weaviate collections, graph namespace and artifacts (a fresh first run)."""
    import shutil

    import weaviate
    from weaviate.classes.init import Auth

    s = _cluster_settings(profile)
    with weaviate.connect_to_local(host="127.0.0.1", port=s.weaviate_http_port, grpc_port=s.weaviate_grpc_port,
                                   auth_credentials=Auth.api_key(s.weaviate_api_key)) as client:
        for name in client.collections.list_all():
            if name.startswith(s.collection_prefix):
                client.collections.delete(name)
    _neo4j(profile, "MATCH (n {ns: $ns}) DETACH DELETE n", ns=s.graph_namespace)
    shutil.rmtree(s.artifacts_dir, ignore_errors=True)


def _neo4j(profile: Settings, cypher: str, **params) -> list[dict]:
    from neo4j import GraphDatabase

    with GraphDatabase.driver(profile.resolved_neo4j_uri, auth=(profile.neo4j_user, profile.neo4j_password)) as d:
        records, _, _ = d.execute_query(cypher, params)
        return [r.data() for r in records]


def _counts(settings: Settings, namespace: str) -> dict[str, int]:
    """Objects per chunking collection (at consistency ALL on a cluster) and entities in the graph namespace."""
    import weaviate
    from weaviate.classes.config import ConsistencyLevel
    from weaviate.classes.init import Auth

    out: dict[str, int] = {}
    with weaviate.connect_to_local(host="127.0.0.1", port=settings.weaviate_http_port,
                                   grpc_port=settings.weaviate_grpc_port,
                                   auth_credentials=Auth.api_key(settings.weaviate_api_key)) as client:
        for chunking in settings.strategies:
            name = settings.collection_prefix + chunking.capitalize()
            collection = client.collections.use(name).with_consistency_level(ConsistencyLevel.ALL)
            ids = [str(o.uuid) for o in collection.iterator()]
            assert len(ids) == len(set(ids))
            out[chunking] = len(ids)
    out["entities"] = _neo4j(settings, "MATCH (e:Entity {ns: $ns}) RETURN count(e) AS n", ns=namespace)[0]["n"]
    return out


def _execute_ingest(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dagster", "job", "execute", "-m", "pipelines.definitions",
                           "-j", "ingest_job"], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)


def _latest_run_events(profile: Settings):
    from dagster import DagsterInstance

    saved = os.environ.copy()
    try:
        os.environ.update(cluster.client_env(profile))
        with DagsterInstance.get() as instance:
            run = instance.get_runs(limit=1)[0]
            return run, instance.all_logs(run.run_id)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_ingest_on_celery_workers_matches_single_process(profile, settings, namespace, tmp_path):
    _clear_profile(profile)
    done = _execute_ingest(_env(profile))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    run, events = _latest_run_events(profile)
    assert run.job_name == "ingest_job" and run.is_success
    workers = {e.dagster_event.engine_event_data.metadata["Celery worker"].value
               for e in events if e.dagster_event and e.dagster_event.is_engine_event
               and "Celery worker" in (e.dagster_event.engine_event_data.metadata or {})}
    assert len(workers) >= 2, workers  # steps of one run went to both workers

    # the "weaviate" pool (limit 1) held across workers: no two Weaviate-writing steps overlapped
    spans: dict[str, list[float]] = {}
    for e in events:
        if e.dagster_event and e.step_key and e.step_key.startswith("vectors_"):
            if e.dagster_event.event_type_value in ("STEP_START", "STEP_SUCCESS", "STEP_FAILURE"):
                spans.setdefault(e.step_key, []).append(e.timestamp)
    intervals = sorted((min(t), max(t)) for t in spans.values())
    assert len(intervals) == len(profile.strategies)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(intervals, intervals[1:])), intervals

    # the same corpus through one in-process run on the single-node stack gives the same counts
    single_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RAGLOOM_EXECUTOR": "in_process",
                  "RAGLOOM_COLLECTION_PREFIX": namespace, "RAGLOOM_GRAPH_NAMESPACE": namespace,
                  "RAGLOOM_ARTIFACTS_DIR": str(tmp_path / "artifacts"), "DAGSTER_HOME": str(tmp_path / "home"),
                  "RAGLOOM_UPLOADS_DIR": str(tmp_path / "uploads")}
    (tmp_path / "home").mkdir()
    try:
        single = _execute_ingest(single_env)
        assert single.returncode == 0, single.stdout[-3000:] + single.stderr[-3000:]
        import dataclasses

        expected = _counts(dataclasses.replace(settings, collection_prefix=namespace), namespace)
        got = _counts(_cluster_settings(profile), cluster.CLUSTER_NAMESPACE)
        assert got == expected and expected["recursive"] > 0 and expected["entities"] > 20
    finally:
        _drop_namespace(settings, namespace)


def _drop_namespace(settings: Settings, namespace: str) -> None:
    import weaviate
    from weaviate.classes.init import Auth

    with weaviate.connect_to_local(host="127.0.0.1", port=settings.weaviate_http_port,
                                   grpc_port=settings.weaviate_grpc_port,
                                   auth_credentials=Auth.api_key(settings.weaviate_api_key)) as client:
        for name in client.collections.list_all():
            if name.startswith(namespace):
                client.collections.delete(name)
    _neo4j(settings, "MATCH (n {ns: $ns}) DETACH DELETE n", ns=namespace)
