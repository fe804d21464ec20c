"""Query latency per retrieval strategy on the SciFact corpus: p50 / p95 over >= 200 queries, models loaded first.

    python benchmarks/query_latency.py [--queries 200] [--strategies hybrid,graph_rag,hierarchical]

The corpus (5,183 abstracts) is chunked (recursive and hierarchical), embedded through the shared embedding
cache and synced into its own collections (prefix ``BenchLatency``) and graph namespace (``bench_latency``)
with the pipeline's own sync functions; a re-run finds them in place and writes nothing. ``--drop`` deletes
them afterwards.

The baseline, measured in the same run, is the least any vector query costs: embedding the query plus one
Weaviate near-vector call, without ragloom's retrieval layer. Every strategy runs with its defaults
(post-processing included). ``--abstention`` also prints the best dense cosine per query (what the
abstention floor is compared with) for the SciFact claims and for off-topic questions.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data" / "scifact"
TARGETS_P95_MS = {"hybrid": 50.0, "graph_rag": 150.0, "hierarchical": 80.0}
PREFIX, GRAPH_NAMESPACE = "BenchLatency", "bench_latency"
OFF_TOPIC = [
    "How do I bake sourdough bread at home?", "Who won the 1998 football world cup?",
    "What is the best way to learn the guitar?", "Recommend a hotel in Lisbon near the old town.",
    "How do I change a flat tyre on a bicycle?", "What time does the train to Berlin leave?",
    "Which programming language should I learn first?", "What is the capital of Australia?",
    "How many goals did Pele score?", "Tips for painting a living room wall.",
]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def ingest(settings, embedder, documents, graph_too: bool, log) -> dict:
    from ragloom.chunking import get_chunker
    from ragloom.extraction import extractor_for
    from ragloom.indexing.graph import sync_graph
    from ragloom.indexing.synonyms import SynonymParams
    from ragloom.indexing.vectors import sync_vectors
    from ragloom.stores.embedding_cache import EmbeddingCache
    from ragloom.stores.neo4j import Neo4jStore
    from ragloom.stores.weaviate import WeaviateStore

    cache = EmbeddingCache(settings.artifacts_dir / "embedding_cache")
    sizes = {}
    with WeaviateStore.connect(settings) as vectors:
        for chunking in ("recursive", "hierarchical"):
            chunks = get_chunker(chunking).chunk_many(documents)
            sizes[chunking] = len(chunks)
            started = time.perf_counter()
            sync_vectors(vectors, embedder, chunking, chunks, cache=cache, log=log)
            log(f"vectors {chunking}: {len(chunks)} chunks in sync after {time.perf_counter() - started:.1f}s")
            if graph_too and chunking == "recursive":
                with Neo4jStore.connect(settings) as graph:
                    started = time.perf_counter()
                    sync_graph(graph, extractor_for(settings), chunking, chunks, log=log, embedder=embedder,
                               synonyms=SynonymParams.from_settings(settings))
                    log(f"graph {chunking}: in sync after {time.perf_counter() - started:.1f}s")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--strategies", default="dense,bm25,hybrid,graph_rag,hierarchical")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--abstention", action="store_true", help="print the best-cosine distribution")
    parser.add_argument("--drop", action="store_true", help="delete the benchmark collections and graph after")
    args = parser.parse_args(argv)

    from ragloom.api import Ragloom
    from ragloom.embedding import make_embedder
    from ragloom.evaluation.datasets import load_dataset
    from ragloom.settings import Settings

    def log(message: str) -> None:
        print(f"  {message}", file=sys.stderr, flush=True)

    strategies = [s for s in args.strategies.split(",") if s]
    settings = dataclasses.replace(Settings.from_env(), collection_prefix=PREFIX, graph_namespace=GRAPH_NAMESPACE)
    dataset = load_dataset(args.data)
    queries = [q.text for q in dataset.queries][: max(args.queries, args.warmup)]
    embedder = make_embedder(settings)  # model load: outside every timing
    sizes = ingest(settings, embedder, dataset.documents, "graph_rag" in strategies, log)

    with Ragloom(settings, embedder=embedder) as rag:
        rag.context.nlp  # noqa: B018 - load spaCy before timing
        store = rag.context.vectors
        from ragloom.filters import build_where
        from ragloom.types import Scope

        def baseline(query: str) -> None:
            vector = embedder.encode([query])[0]
            store.near_vector("recursive", vector, args.k, where=build_where(Scope()))

        runs = {"baseline": baseline}
        for strategy in strategies:
            retriever = rag.retriever(strategy)
            runs[strategy] = lambda q, r=retriever: r.search(q, k=args.k)
        for run in runs.values():  # warm caches, connections and lazily loaded pieces
            for q in queries[: args.warmup]:
                run(q)

        latencies: dict[str, list[float]] = {name: [] for name in runs}
        stage_times: dict[str, dict[str, list[float]]] = {}
        fallbacks: dict[str, int] = {}
        # strategies take turns on each query, so a change in machine load hits them all alike
        for q in queries[: args.queries]:
            for name, run in runs.items():
                times = latencies[name]
                started = time.perf_counter()
                result = run(q)
                times.append((time.perf_counter() - started) * 1000)
                if result is not None:
                    for stage, ms in result.metadata["timings_ms"].items():
                        stage_times.setdefault(name, {}).setdefault(stage, []).append(ms)
                    fallbacks[name] = fallbacks.get(name, 0) + bool(result.metadata["fallbacks"])

        base_p95 = percentile(latencies["baseline"], 95)
        print(f"\nquery latency, SciFact: {len(dataset.documents)} documents, recursive {sizes['recursive']} chunks, "
              f"hierarchical {sizes['hierarchical']} chunks; {args.queries} queries, k={args.k}, "
              f"embedder {embedder.model_id}")
        print(f"{'strategy':<14}{'p50 ms':>9}{'p95 ms':>9}{'mean ms':>9}{'p95/base':>10}{'target p95':>12}  "
              f"{'fallbacks':>9}  slowest stages (p50 ms)")
        for name, times in latencies.items():
            p95 = percentile(times, 95)
            target = TARGETS_P95_MS.get(name)
            verdict = "" if target is None else f"{target:>6.0f} {'ok' if p95 <= target else 'MISS'}"
            stages = sorted(((s, statistics.median(v)) for s, v in stage_times.get(name, {}).items() if s != "total"),
                            key=lambda x: -x[1])[:4]
            print(f"{name:<14}{percentile(times, 50):>9.1f}{p95:>9.1f}{statistics.fmean(times):>9.1f}"
                  f"{p95 / base_p95:>10.2f}{verdict:>12}  {fallbacks.get(name, 0):>9}  "
                  + ", ".join(f"{s} {ms:.1f}" for s, ms in stages))

        if args.abstention:
            dense = rag.retriever("dense", dedup=False, abstain_floor=-1.0)  # measure, never abstain
            claims = [dense.search(q.text, k=1).metadata["best_dense_cosine"] for q in dataset.queries]
            off = [dense.search(q, k=1).metadata["best_dense_cosine"] for q in OFF_TOPIC]
            claims = [c for c in claims if c is not None]
            print(f"\nbest dense cosine per query (recursive chunks): {len(claims)} SciFact claims, all answerable")
            for q in (1, 5, 10, 25, 50):
                print(f"  p{q:<3} {percentile(claims, q):.3f}")
            for floor in (0.2, 0.25, 0.3, 0.35, 0.4, 0.5):
                share = sum(c < floor for c in claims) / len(claims)
                print(f"  floor {floor:.2f}: abstains on {share:6.1%} of answerable claims, "
                      f"{sum(c < floor for c in off)}/{len(off)} off-topic questions")
            print(f"  off-topic best cosines: {', '.join(f'{c:.2f}' for c in sorted(off))}")

    if args.drop:
        from ragloom.stores.neo4j import Neo4jStore
        from ragloom.stores.weaviate import WeaviateStore

        with WeaviateStore.connect(settings) as vectors:
            for chunking in ("recursive", "hierarchical"):
                vectors.drop(chunking)
        with Neo4jStore.connect(settings) as graph:
            graph.clear()
    return 0


if __name__ == "__main__":
    sys.exit(main())
