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


# Two chunkings keep the runs short and still put two steps in the "weaviate" pool.
PROFILE_ENV = {"RAGLOOM_CHUNKINGS": "recursive,headered", "RAGLOOM_GRAPH_CHUNKINGS": "recursive"}


@pytest.fixture(scope="module")
def profile(settings: Settings) -> Iterator[Settings]:
    """The cluster profile, started fresh so its workers run this checkout with PROFILE_ENV (stopped after this
    module: it costs memory the rest of the suite wants)."""
    saved = os.environ.copy()
    os.environ.update(PROFILE_ENV)
    try:
        cluster.down(settings)
        started = cluster.up(stack.up(Settings.from_env()))
        yield started
        cluster.down(started)
    finally:
        os.environ.clear()
        os.environ.update(saved)


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
        for chunking in settings.chunkings:
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


@pytest.fixture(scope="module")
def single_process_counts(profile: Settings, tmp_path_factory) -> Iterator[dict[str, int]]:
    """Chunk and entity counts of the sample corpus through one in-process run on the single-node stack."""
    import dataclasses
    import uuid

    namespace = f"Test{uuid.uuid4().hex[:10]}"
    tmp = tmp_path_factory.mktemp("single")
    (tmp / "home").mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RAGLOOM_EXECUTOR": "in_process",
           "RAGLOOM_COLLECTION_PREFIX": namespace, "RAGLOOM_GRAPH_NAMESPACE": namespace,
           "RAGLOOM_ARTIFACTS_DIR": str(tmp / "artifacts"), "DAGSTER_HOME": str(tmp / "home"),
           "RAGLOOM_UPLOADS_DIR": str(tmp / "uploads")}
    try:
        done = _execute_ingest(env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        counts = _counts(dataclasses.replace(Settings.from_env(), collection_prefix=namespace), namespace)
        assert counts["recursive"] > 0 and counts["entities"] > 20
        yield counts
    finally:
        _drop_namespace(Settings.from_env(), namespace)


def _worker_events(events, step_key: str | None = None) -> list[tuple[str, str]]:
    """(step key, Celery worker) of every "Executing steps ... in celery worker" event."""
    out = []
    for e in events:
        data = e.dagster_event.engine_event_data if e.dagster_event and e.dagster_event.is_engine_event else None
        if data and "Celery worker" in (data.metadata or {}) and (step_key is None or e.step_key == step_key):
            out.append((e.step_key, data.metadata["Celery worker"].value))
    return out


def test_ingest_on_celery_workers_matches_single_process(profile, single_process_counts):
    _clear_profile(profile)
    done = _execute_ingest(_env(profile))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    run, events = _latest_run_events(profile)
    assert run.job_name == "ingest_job" and run.is_success
    workers = {worker for _, worker in _worker_events(events)}
    assert len(workers) >= 2, workers  # steps of one run went to both workers

    # the "weaviate" pool (limit 1) held across workers: no two Weaviate-writing steps overlapped
    spans: dict[str, list[float]] = {}
    vector_steps = {f"vectors_{chunking}" for chunking in profile.chunkings}
    for e in events:
        if e.dagster_event and e.step_key in vector_steps:
            if e.dagster_event.event_type_value in ("STEP_START", "STEP_SUCCESS", "STEP_FAILURE"):
                spans.setdefault(e.step_key, []).append(e.timestamp)
    intervals = sorted((min(t), max(t)) for t in spans.values())
    assert len(intervals) == len(profile.chunkings)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(intervals, intervals[1:], strict=False)), intervals

    assert _counts(_cluster_settings(profile), cluster.CLUSTER_NAMESPACE) == single_process_counts


def test_worker_killed_mid_step_is_re_executed(profile, single_process_counts):
    """SIGKILL the process running the graph step: Celery puts the step back (acks late, reject on worker
    lost), a worker runs it again, the run succeeds, and the stores hold exactly the single run's counts."""
    import signal
    import time

    _clear_profile(profile)
    try:
        before = _latest_run_events(profile)[0].run_id
    except IndexError:
        before = None
    proc = subprocess.Popen([sys.executable, "-m", "dagster", "job", "execute", "-m", "pipelines.definitions",
                             "-j", "ingest_job"], env=_env(profile), cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    step = "graph_recursive"
    killed = None
    deadline = time.monotonic() + 600
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
        try:
            run, events = _latest_run_events(profile)
        except IndexError:  # no run stored yet
            continue
        if run.run_id == before:  # this test's run is not stored yet
            continue
        running = _worker_events(events, step)
        if running:
            name = running[0][1].split("@")[0]
            children = cluster.worker_children(profile, name)
            assert children, f"{name} runs no pool process"
            for pid in children:
                os.kill(pid, signal.SIGKILL)
            killed = name
    output, _ = proc.communicate(timeout=900)
    assert killed, "the graph step never started"
    assert proc.returncode == 0, output[-4000:]
    run, events = _latest_run_events(profile)
    assert run.is_success
    assert len(_worker_events(events, step)) >= 2  # the step was handed to a worker again
    assert _counts(_cluster_settings(profile), cluster.CLUSTER_NAMESPACE) == single_process_counts


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


def _musique_chunks(n: int) -> list:
    from ragloom.chunking import get_chunker
    from ragloom.evaluation.datasets import read_corpus

    chunker = get_chunker("recursive")
    corpus = REPO_ROOT.parent / "shared" / "data" / "musique" / "corpus.jsonl"
    return [c for d in read_corpus(corpus, "musique")[:n] for c in chunker.chunk(d)]


def _missing_on_node(settings: Settings, collection: str, node_name: str, uuids: set[str]) -> set[str]:
    """The objects of ``uuids`` that node ``node_name``'s own replica does not hold: each read with Weaviate's
    ``node_name`` parameter, which answers from that node only. (The nodes API's per-shard object count is no
    substitute: it counts flushed segments only, and a repaired replica sits in the memtable until its idle
    flush a minute later.)"""
    import httpx

    with httpx.Client(base_url=f"http://127.0.0.1:{settings.weaviate_http_port}",
                      headers={"Authorization": f"Bearer {settings.weaviate_api_key}"}, timeout=30) as http:
        missing = set()
        for object_id in uuids:
            response = http.get(f"/v1/objects/{collection}/{object_id}", params={"node_name": node_name})
            if response.status_code == 404:
                missing.add(object_id)
            else:
                response.raise_for_status()
        return missing


def test_weaviate_node_killed_mid_sync(profile):
    """Replication factor 3, writes at QUORUM: SIGKILL one node while a sync writes. The sync completes, or
    fails and a re-run completes; counts are exact, queries answer at QUORUM while the node is down, and the
    restarted node catches up (async replication) to hold every object."""
    import dataclasses
    import threading
    import time
    import uuid

    import numpy as np
    from weaviate.util import generate_uuid5

    from ragloom.embedding import make_embedder
    from ragloom.errors import StoreError
    from ragloom.indexing.vectors import sync_vectors
    from ragloom.stores.weaviate import WeaviateStore

    # a write that waits on the replica killed under it times out after 10 s and is re-sent (an upsert); a read
    # routed to it fails after 10 s too (the first sync may then fail: the re-run below must complete)
    s = dataclasses.replace(_cluster_settings(profile), collection_prefix=f"Kill{uuid.uuid4().hex[:8]}",
                            weaviate_write_timeout_seconds=10.0, weaviate_query_timeout_seconds=10.0)
    assert s.weaviate_replication_factor == 3
    chunks = _musique_chunks(300)
    expected = len({c.chunk_id for c in chunks})
    embedder = make_embedder(s)
    victim = weaviate_cluster.nodes(profile)[2]
    store = WeaviateStore.connect(s)
    watcher = WeaviateStore.connect(s)
    killed = threading.Event()

    def kill_once_writing() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if watcher.exists("recursive") and watcher.count("recursive") > 0:
                    weaviate_cluster.process(profile, victim).kill()
                    killed.set()
                    return
            except StoreError:
                pass
            time.sleep(0.05)

    killer = threading.Thread(target=kill_once_writing, daemon=True)
    killer.start()
    try:
        try:
            sync_vectors(store, embedder, "recursive", chunks, batch_size=32)
        except StoreError:
            pass  # allowed: the re-run below must complete
        killer.join(timeout=300)
        assert killed.is_set(), "no object was written before the deadline"
        assert not weaviate_cluster.ready(profile, victim)
        report = sync_vectors(store, embedder, "recursive", chunks, batch_size=32)
        assert report.deleted == 0
        assert store.count("recursive") == expected
        assert len(store.chunk_index("recursive")) == expected  # no duplicates, none missing

        # queries keep answering at QUORUM (2 of 3 replicas) while the node is down
        vector = np.asarray(embedder.encode([chunks[0].embed_text])[0], dtype=np.float32)
        hits = store.near_vector("recursive", vector, k=5)
        assert len(hits) == 5

        # the node comes back and its replicas catch up
        weaviate_cluster.start_node(profile, profile.weaviate_api_key, victim)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not weaviate_cluster.ready(profile, victim):
            time.sleep(0.5)
        name = store.collection_name("recursive")
        missing = {generate_uuid5(c.chunk_id) for c in chunks}
        while missing and time.monotonic() < deadline:
            time.sleep(0.5)
            missing = _missing_on_node(s, name, victim.name, missing)
        assert not missing, f"{len(missing)} of {expected} objects never reached the restarted node"
    finally:
        if not weaviate_cluster.process(profile, victim).running():
            weaviate_cluster.start_node(profile, profile.weaviate_api_key, victim)
        store.drop_collections()
        store.close()
        watcher.close()
