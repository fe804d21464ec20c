"""Query latency per retrieval strategy on the SciFact corpus: p50 / p95 over >= 200 queries, models loaded first.

    python benchmarks/query_latency.py [--queries 200] [--strategies hybrid,graph_rag,hierarchical]
                                       [--documents N] [--prefix BenchLatency] [--drop]

The corpus (5,183 abstracts, or the first ``--documents``) is chunked (recursive and hierarchical), embedded
through the shared embedding cache and synced into its own collections (prefix ``BenchLatency``) and graph
namespace (``bench_latency``; another ``--prefix`` P uses namespace p) with the pipeline's own sync
functions; a re-run finds them in place and writes nothing. ``--drop`` deletes them afterwards, also when
the run fails.

``--scale-to N`` (graph_rag's target is stated at >= 25,000 chunks) tiles the corpus: copies of every
abstract under new document ids until the recursive collection holds at least N chunks (prefix
``BenchLatency<N>``). Copies reuse the cached embeddings, and the graph of each copy is the original's
extraction (parsed once) written under renamed chunk and entity ids, so the graph grows like the corpus.

The baseline, measured in the same run, is the least any vector query costs: embedding the query plus one
Weaviate near-vector call, without ragloom's retrieval layer. No query embedding is kept
(RAGLOOM_QUERY_VECTOR_CACHE=0): every strategy pays its own, as a new query would. Every strategy runs with its defaults
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
TARGET_PPR_P95_MS = 30.0
PREFIX, GRAPH_NAMESPACE = "BenchLatency", "bench_latency"
CHUNKINGS = ("recursive", "hierarchical")
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
        for chunking in CHUNKINGS:
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


def tiled(documents, copies: int) -> list:
    """The documents and ``copies - 1`` copies of each under document ids suffixed ``~k``."""
    out = list(documents)
    for k in range(1, copies):
        out += [dataclasses.replace(d, document_id=f"{d.document_id}~{k}") for d in documents]
    return out


def ingest_scaled(settings, embedder, documents, scale_to: int, log) -> dict:
    """Recursive chunks of tiled documents (>= scale_to), vectors through the cache, graph by copied extraction."""
    from ragloom.chunking import get_chunker
    from ragloom.extraction import extractor_for
    from ragloom.indexing.vectors import sync_vectors
    from ragloom.stores.embedding_cache import EmbeddingCache
    from ragloom.stores.neo4j import Neo4jStore
    from ragloom.stores.weaviate import WeaviateStore
    from ragloom.types import Entity, Mention, Relation

    chunker = get_chunker("recursive")
    original = chunker.chunk_many(documents)
    copies = -(-scale_to // len(original))
    everything = chunker.chunk_many(tiled(documents, copies))
    cache = EmbeddingCache(settings.artifacts_dir / "embedding_cache")
    with WeaviateStore.connect(settings) as vectors:
        started = time.perf_counter()
        sync_vectors(vectors, embedder, "recursive", everything, cache=cache, log=log)
        log(f"vectors recursive: {len(everything)} chunks in sync after {time.perf_counter() - started:.1f}s")
    with Neo4jStore.connect(settings) as graph:
        done = set(graph.chunk_ids("recursive"))
        if len(done) < len(everything):
            started = time.perf_counter()
            extraction = extractor_for(settings).extract(original, log=log)
            log(f"graph: extracted {len(original)} chunks in {time.perf_counter() - started:.1f}s")
            per_copy = len(original)
            for k in range(copies):
                chunks = everything[k * per_copy:(k + 1) * per_copy]
                if all(c.chunk_id in done for c in chunks):
                    continue
                rename = {o.chunk_id: c.chunk_id for o, c in zip(original, chunks, strict=True)}
                tag = f"~{k}" if k else ""
                copy = dataclasses.replace(
                    extraction,
                    entities=[Entity(e.entity_id + tag, e.name, e.type, e.aliases) for e in extraction.entities],
                    mentions=[Mention(rename[m.chunk_id], m.entity_id + tag, m.count, m.labels)
                              for m in extraction.mentions],
                    relations=[Relation(r.source_id + tag, r.target_id + tag, r.type, rename[r.chunk_id], r.weight)
                               for r in extraction.relations],
                    keys={e + tag: v for e, v in extraction.keys.items()},
                    chunk_ids=[rename[c] for c in extraction.chunk_ids])
                graph.upsert_chunks(chunks)
                graph.write_extraction(copy, copy.chunk_ids)
                log(f"graph: copy {k + 1}/{copies} written ({time.perf_counter() - started:.1f}s)")
    return {"recursive": len(everything), "hierarchical": 0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--strategies", default="dense,bm25,hybrid,graph_rag,hierarchical")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--abstention", action="store_true", help="print the best-cosine distribution")
    parser.add_argument("--documents", type=int, default=0, help="use only the first N abstracts (0: all)")
    parser.add_argument("--prefix", default=PREFIX, help="collection prefix (its lower case names the graph)")
    parser.add_argument("--drop", action="store_true", help="delete the benchmark collections and graph after")
    parser.add_argument("--scale-to", type=int, default=0, help="tile the corpus to at least this many chunks")
    args = parser.parse_args(argv)

    from ragloom.settings import Settings

    def log(message: str) -> None:
        print(f"  {message}", file=sys.stderr, flush=True)

    strategies = [s for s in args.strategies.split(",") if s]
    suffix = str(args.scale_to) if args.scale_to else ""
    namespace = GRAPH_NAMESPACE if args.prefix == PREFIX else args.prefix.lower()
    # no query embedding kept (RAGLOOM_QUERY_VECTOR_CACHE=0): the strategies take turns on each query, and with
    # the cache every strategy after the first reused the first one's embedding of it
    settings = dataclasses.replace(Settings.from_env(), collection_prefix=args.prefix + suffix,
                                   graph_namespace=namespace + suffix, query_vector_cache=0)
    try:
        return measure(args, settings, strategies, log)
    finally:
        if args.drop:
            drop(settings)


def drop(settings) -> None:
    """Delete the benchmark's collections and graph namespace."""
    from ragloom.stores.neo4j import Neo4jStore
    from ragloom.stores.weaviate import WeaviateStore

    with WeaviateStore.connect(settings) as vectors:
        for chunking in CHUNKINGS:  # by name: another prefix may start with this one
            vectors.drop_collection(chunking)
    with Neo4jStore.connect(settings) as graph:
        graph.clear()


def measure(args: argparse.Namespace, settings, strategies: list[str], log) -> int:
    from ragloom.api import Ragloom
    from ragloom.embedding import make_embedder
    from ragloom.evaluation.datasets import load_dataset
    from ragloom.retrieval import get_retriever

    dataset = load_dataset(args.data)
    documents = dataset.documents[: args.documents or None]
    queries = [q.text for q in dataset.queries][: max(args.queries, args.warmup)]
    embedder = make_embedder(settings)  # model load: outside every timing
    if args.scale_to:
        if "hierarchical" in strategies:
            raise SystemExit("--scale-to tiles the recursive collection only: leave hierarchical out of --strategies")
        sizes = ingest_scaled(settings, embedder, documents, args.scale_to, log)
    else:
        sizes = ingest(settings, embedder, documents, "graph_rag" in strategies, log)

    with Ragloom(settings) as rag:  # its own query embedder, as shipped (one thread: ragloom.api)
        for strategy in strategies:  # spaCy, Neo4j and the in-process graph load before any timing
            rag.warm(strategy)
        store = rag.context.vectors
        from ragloom.filters import build_where
        from ragloom.types import Scope

        def baseline(query: str) -> None:
            vector = rag.context.embedder.encode([query])[0]  # the strategies' query embedder
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
                    for stage, ms in result.metadata.timings_ms.items():
                        stage_times.setdefault(name, {}).setdefault(stage, []).append(ms)
                    fallbacks[name] = fallbacks.get(name, 0) + bool(result.metadata.fallbacks)

        base_p95 = percentile(latencies["baseline"], 95)
        print(f"\nquery latency, SciFact: {len(documents)} documents, recursive {sizes['recursive']} chunks, "
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

        for name in ("graph_rag", "multi_hop"):
            stages = stage_times.get(name, {})
            if "ppr" in stages:
                p95 = percentile(stages["ppr"], 95)
                print(f"{name} PPR step alone: p50 {percentile(stages['ppr'], 50):.1f} ms, p95 {p95:.1f} ms "
                      f"(target p95 <= {TARGET_PPR_P95_MS:.0f}: {'ok' if p95 <= TARGET_PPR_P95_MS else 'MISS'})")
            for stage in ("graph_load", "graph_seeds", "fetch"):
                if stage in stages:
                    print(f"{name} {stage}: p50 {percentile(stages[stage], 50):.1f} ms, "
                          f"p95 {percentile(stages[stage], 95):.1f} ms")

        if args.abstention:
            dense = get_retriever("dense", rag.context, dedup=False, abstain_floor=-1.0)  # measure, never abstain
            claims = [dense.search(q.text, k=1).metadata.best_dense_cosine for q in dataset.queries]
            off = [dense.search(q, k=1).metadata.best_dense_cosine for q in OFF_TOPIC]
            claims = [c for c in claims if c is not None]
            print(f"\nbest dense cosine per query (recursive chunks): {len(claims)} SciFact claims, all answerable")
            for q in (1, 5, 10, 25, 50):
                print(f"  p{q:<3} {percentile(claims, q):.3f}")
            for floor in (0.2, 0.25, 0.3, 0.35, 0.4, 0.5):
                share = sum(c < floor for c in claims) / len(claims)
                print(f"  floor {floor:.2f}: abstains on {share:6.1%} of answerable claims, "
                      f"{sum(c < floor for c in off)}/{len(off)} off-topic questions")
            print(f"  off-topic best cosines: {', '.join(f'{c:.2f}' for c in sorted(off))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
