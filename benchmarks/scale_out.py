"""Scale-out overhead on loopback: the ingest job on 1 vs 2 Celery workers, and vector writes to a single
Weaviate node vs the 3-node cluster with replication factor 3, measured in one run.

These machines have 2 cores, so more workers cannot be faster here: the figures show what distribution costs
(ratios against the single-machine path measured in the same run), and the README turns the per-core rates into
expected throughput per worker on real hosts.

    python benchmarks/scale_out.py [--repeats 3] [--chunks 600] [--smoke]

Needs `ragloom stack up --profile cluster` (started here when not running; stopped at the end only if started
here). ``--smoke``: a few chunks, one repeat, no Celery runs (seconds).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ragloom import stack  # noqa: E402
from ragloom.settings import Settings  # noqa: E402
from ragloom.stack import cluster, weaviate_cluster  # noqa: E402

MUSIQUE = REPO.parent / "shared" / "data" / "musique" / "corpus.jsonl"


def _chunks(n: int) -> list:
    """The first ``n`` MuSiQue paragraphs as recursive chunks (a real corpus, small enough for loopback)."""
    from ragloom.chunking import get_chunker
    from ragloom.evaluation.datasets import read_corpus

    chunker = get_chunker("recursive")
    return [c for d in read_corpus(MUSIQUE, "musique")[:n] for c in chunker.chunk(d)][:n]


def _write_seconds(settings: Settings, chunks: list, vectors: list) -> float:
    """Time to write ``chunks`` with precomputed vectors into a fresh collection; the collection is dropped."""
    from ragloom.stores.weaviate import WeaviateStore

    prefix = f"Bench{uuid.uuid4().hex[:8]}"
    store = WeaviateStore.connect(dataclasses.replace(settings, collection_prefix=prefix))
    try:
        store.ensure_collection("recursive", len(vectors[0]))
        started = time.perf_counter()
        store.upsert_chunks("recursive", chunks, vectors)
        return time.perf_counter() - started
    finally:
        store.drop_collections()
        store.close()


def measure_replication(settings: Settings, n: int, repeats: int) -> dict:
    from ragloom.embedding import make_embedder

    chunks = _chunks(n)
    vectors = make_embedder(settings).encode([c.embed_text for c in chunks])
    node0 = weaviate_cluster.nodes(settings)[0]
    replicated = dataclasses.replace(weaviate_cluster.node_settings(settings, node0),
                                     weaviate_replication_factor=min(3, settings.weaviate_nodes))
    single, cluster3 = [], []
    for _ in range(repeats):  # alternate, so drift on a shared machine hits both alike
        single.append(_write_seconds(settings, chunks, vectors))
        cluster3.append(_write_seconds(replicated, chunks, vectors))
    s, c = statistics.median(single), statistics.median(cluster3)
    return {"chunks": len(chunks), "single_node_s": round(s, 3), "cluster_rf3_s": round(c, 3),
            "single_chunks_per_s": round(len(chunks) / s, 1), "cluster_chunks_per_s": round(len(chunks) / c, 1),
            "replication_overhead": round(c / s, 2)}


def _ingest_seconds(settings: Settings) -> float:
    """One ingest_job run of the sample corpus on the cluster profile from empty stores; run wall time."""
    env = {**os.environ, **cluster.client_env(settings), "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dagster", "job", "execute", "-m", "pipelines.definitions",
                           "-j", "ingest_job"], env=env, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"ingest failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return time.perf_counter() - started


def _clear(settings: Settings) -> None:
    import shutil

    from ragloom.stores.neo4j import Neo4jStore
    from ragloom.stores.weaviate import WeaviateStore

    s = dataclasses.replace(weaviate_cluster.node_settings(settings, weaviate_cluster.nodes(settings)[0]))
    with WeaviateStore.connect(s) as store:
        store.drop_collections()
    with Neo4jStore.connect(settings, namespace=cluster.CLUSTER_NAMESPACE) as graph:
        graph.clear()
    shutil.rmtree(settings.data_dir / "artifacts-cluster", ignore_errors=True)


def measure_workers(settings: Settings, repeats: int) -> dict:
    times: dict[int, list[float]] = {1: [], 2: []}
    second = cluster.worker(settings, cluster.worker_names(settings)[1])
    for _ in range(repeats):
        for workers in (2, 1):
            if workers == 1:
                second.stop(timeout=60)
            else:
                cluster.start_workers(settings)
            _clear(settings)
            times[workers].append(_ingest_seconds(settings))
    cluster.start_workers(settings)
    one, two = statistics.median(times[1]), statistics.median(times[2])
    return {"ingest_1_worker_s": round(one, 1), "ingest_2_workers_s": round(two, 1),
            "two_over_one": round(two / one, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunks", type=int, default=600)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.chunks = 1, 20
    settings = stack.up(Settings.from_env())
    was_running = all(weaviate_cluster.ready(settings, n) for n in weaviate_cluster.nodes(settings))
    settings = cluster.up(settings) if not args.smoke else cluster.with_secrets(settings)
    if args.smoke and not was_running:
        weaviate_cluster.start(settings, settings.weaviate_api_key)
    try:
        report = {"replication": measure_replication(settings, args.chunks, args.repeats)}
        if not args.smoke:
            report["celery_workers"] = measure_workers(settings, args.repeats)
    finally:
        if not was_running:
            cluster.down(settings)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
