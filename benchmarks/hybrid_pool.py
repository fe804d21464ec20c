"""Weaviate's hybrid pool: what it costs and what it changes in the rankings.

Weaviate runs a hybrid query as two searches, vector and BM25, each asked for ``max(QUERY_HYBRID_MAXIMUM_RESULTS,
limit)`` objects (the pool, 100 by default), then fuses them. The relative-score fusion scales each search's
scores by the lowest and highest in its pool, so the pool's size changes the fused order, not only its cost.

For each pool size, this script restarts the local stack's Weaviate (`ragloom stack up`, its data kept) with
``QUERY_HYBRID_MAXIMUM_RESULTS`` set, runs `ragloom eval` on the dev sets with hybrid and graph_rag, and measures
Weaviate's CPU per hybrid call on SciFact's eval collection, ids only, at k 10 and at k 50 (graph_rag's lane asks
for 50). The eval retrieves 30 deep and asks the store for twice that (room for de-duplication), so its hybrid
calls ask for 60: every pool up to 60 gives the same eval. Then it prints each pool's metrics as paired
differences from the first pool's, with bootstrap intervals, and starts Weaviate again with the stack's own settings.

    python benchmarks/hybrid_pool.py [--pools 100,60,200] [--datasets musique,scifact,obliqa] [--calls 300]

Needs the stack up, and the dev sets under ../shared/data. Each pool takes ~3 minutes on 2 cores (the eval's
collections and graphs are made on the first run and kept).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import psutil

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"
METRICS = ("ndcg@10", "recall@10", "recall@5")


def restart_weaviate(settings, pool: int | None) -> None:
    """The stack's Weaviate stopped, then started on its data with ``QUERY_HYBRID_MAXIMUM_RESULTS`` = ``pool``
    (None: the stack's own settings)."""
    from ragloom.stack import weaviate as server

    server.process(settings).stop()
    extra = {"QUERY_HYBRID_MAXIMUM_RESULTS": str(pool)} if pool is not None else None
    server.start(settings, settings.weaviate_api_key, extra_env=extra)


def cpu_per_call(settings, queries: list[str], vectors: np.ndarray, k: int) -> tuple[float, float]:
    """(Weaviate's CPU ms per hybrid call, wall ms per call), ids only, on SciFact's eval collection."""
    from ragloom.stack import weaviate as server
    from ragloom.stores.weaviate import WeaviateStore

    pid = server.process(settings).pid()
    if pid is None:  # psutil.Process(None) would be this script, and its CPU would pass for Weaviate's
        raise SystemExit("the stack's Weaviate is not running (no live pid in its pid file)")
    weaviate = psutil.Process(pid)
    with WeaviateStore.connect(replace(settings, collection_prefix="EvalScifact")) as store:
        for text, vector in zip(queries[:20], vectors[:20], strict=True):  # warm-up
            store.hybrid("recursive", text, vector, k, ids_only=True)
        before, started = weaviate.cpu_times(), time.perf_counter()
        for text, vector in zip(queries, vectors, strict=True):
            store.hybrid("recursive", text, vector, k, ids_only=True)
        wall = time.perf_counter() - started
        after = weaviate.cpu_times()
    used = (after.user - before.user) + (after.system - before.system)
    return used * 1000 / len(queries), wall * 1000 / len(queries)


def per_query(out: Path, dataset: str) -> dict:
    return json.loads((out / dataset / f"{dataset}_eval.json").read_text())["per_query"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pools", default="100,60,200", help="the first is the baseline of the differences")
    parser.add_argument("--datasets", default="musique,scifact,obliqa")
    parser.add_argument("--strategies", default="hybrid,graph_rag")
    parser.add_argument("--calls", type=int, default=300, help="hybrid calls per CPU measurement")
    parser.add_argument("--out", default="", help="keep the eval outputs here (default: a temporary folder)")
    args = parser.parse_args()
    pools = [int(p) for p in args.pools.split(",") if p]
    datasets = [d for d in args.datasets.split(",") if d]

    from ragloom.embedding import make_embedder
    from ragloom.evaluation.datasets import load_dataset
    from ragloom.evaluation.metrics import paired_difference_ci
    from ragloom.settings import Settings

    settings = Settings.from_env()
    queries = [q.text for q in load_dataset(DATA / "scifact").queries][: args.calls]
    vectors = make_embedder(settings, short_texts=True).encode(queries)  # once: the same vectors for every pool
    out_root = Path(args.out or tempfile.mkdtemp(prefix="ragloom-hybrid-pool-"))
    print(f"pools {pools}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}; outputs in {out_root}",
          flush=True)
    cost: dict[int, dict[int, tuple[float, float]]] = {}
    try:
        for pool in pools:
            restart_weaviate(settings, pool)
            for dataset in datasets:
                started = time.perf_counter()
                done = subprocess.run([sys.executable, "-m", "ragloom", "eval", "--dataset", str(DATA / dataset),
                                       "--strategies", args.strategies, "--no-baselines",
                                       "--out", str(out_root / f"pool{pool}" / dataset)],
                                      cwd=REPO, capture_output=True, text=True)
                if done.returncode != 0:
                    raise SystemExit(f"ragloom eval failed on {dataset} at pool {pool}:\n{done.stderr[-3000:]}")
                print(f"pool {pool}: {dataset} evaluated in {time.perf_counter() - started:.0f} s", flush=True)
            cost[pool] = {k: cpu_per_call(settings, queries, vectors, k) for k in (10, 50)}
            print(f"pool {pool}: Weaviate CPU per hybrid call "
                  + ", ".join(f"k {k} {c:.2f} ms (wall {w:.2f})" for k, (c, w) in cost[pool].items()), flush=True)
    finally:
        restart_weaviate(settings, None)

    base = pools[0]
    print(f"\nWeaviate CPU ms per hybrid call, ids only, SciFact eval collection ({args.calls} claims):")
    for pool in pools:
        print(f"  pool {pool:>4}: " + "  ".join(f"k {k}: {c:.2f}" for k, (c, _) in cost[pool].items()))
    print(f"\npaired differences from pool {base} (2,000 bootstrap resamples):")
    for dataset in datasets:
        reference = per_query(out_root / f"pool{base}", dataset)
        for system, levels in reference.items():
            for level, scores in levels.items():
                print(f"{dataset} {system} ({level} level): pool {base} "
                      + ", ".join(f"{m} {np.mean(scores[m]):.4f}" for m in METRICS))
                for pool in pools[1:]:
                    other = per_query(out_root / f"pool{pool}", dataset)[system][level]
                    if other["query_ids"] != scores["query_ids"]:
                        raise SystemExit(f"{dataset}: the pools' runs scored different queries")
                    cells = []
                    for m in METRICS:
                        e = paired_difference_ci(other[m], scores[m], resamples=2000, seed=1)
                        cells.append(f"{m} {e.mean:+.4f} [{e.low:+.4f}, {e.high:+.4f}]")
                    print(f"  pool {pool:>4}: " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
