"""RAPTOR-lite against ADR-003's targets: summary build time, storage overhead over the flat index, added latency.

    nice -n 5 python benchmarks/raptor.py [--dataset scifact] [--documents 1000] [--queries 50]
                                          [--prefix BenchRaptor] [--keep]

The first ``--documents`` records of a dataset under ../shared/data are chunked (recursive) and synced into
their own collections (prefix ``BenchRaptor``) with a fresh embedding cache, so every figure is cold:

- **build**: the extractive summary level (``sync_summaries``: sections, sentence embeddings, summaries,
  embedding and writing the summaries), in seconds per 1,000 documents; the flat index (chunk, embed, write)
  is timed in the same run as the baseline. Target < 300 s per 1,000 documents on 2 cores. A second build
  with nothing changed is timed too (it must summarize nothing).
- **storage**: objects, and bytes of text plus float32 vectors, of the summary level over the flat
  collection's. Target <= 50%.
- **latency**: ``raptor`` (hybrid lane) against plain ``hybrid`` on the same collection, medians and p95 over
  the dataset's queries, interleaved after a warm-up. Target: added latency < 500 ms.

The collections are dropped at the end unless ``--keep``. Prints a table and one JSON line per figure set.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"

BUILD_TARGET_S = 300.0  # per 1,000 documents, extractive, 2 cores
STORAGE_TARGET = 0.5
LATENCY_TARGET_MS = 500.0


def _bytes(texts: list[str], dimension: int) -> int:
    return sum(len(t.encode()) for t in texts) + 4 * dimension * len(texts)


def _timed(search, queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        started = time.perf_counter()
        search(q)
        out.append((time.perf_counter() - started) * 1000)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="scifact")
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--budget", type=int, default=120, help="words per summary")
    parser.add_argument("--window", type=int, default=8, help="chunks per section without headings")
    parser.add_argument("--prefix", default="BenchRaptor")
    parser.add_argument("--keep", action="store_true", help="leave the collections in place")
    args = parser.parse_args(argv)

    from ragloom.api import Ragloom
    from ragloom.chunking import chunker_for
    from ragloom.embedding import make_embedder
    from ragloom.evaluation.datasets import read_corpus
    from ragloom.indexing.summaries import load_state, summary_collection, sync_summaries
    from ragloom.indexing.vectors import sync_vectors
    from ragloom.retrieval import get_retriever
    from ragloom.settings import Settings, usable_cpus
    from ragloom.stores.embedding_cache import EmbeddingCache
    from ragloom.stores.weaviate import WeaviateStore

    settings = dataclasses.replace(Settings.from_env(), collection_prefix=args.prefix)
    documents = read_corpus(DATA / args.dataset / "corpus.jsonl", args.dataset)[: args.documents]
    with (DATA / args.dataset / "queries.jsonl").open() as f:
        queries = [json.loads(line)["text"] for line in f][: args.queries]
    embedder = make_embedder(settings)
    embedder.encode(["warm up"])
    store = WeaviateStore.connect(settings)
    try:
        with tempfile.TemporaryDirectory(prefix="raptor-bench-") as tmp:
            cache = EmbeddingCache(Path(tmp) / "cache")
            started = time.perf_counter()
            chunks = chunker_for("recursive", embedder).chunk_many(documents)
            flat = sync_vectors(store, embedder, "recursive", chunks, cache=cache)
            flat_s = time.perf_counter() - started
            state = Path(tmp) / "state.json"
            started = time.perf_counter()
            report = sync_summaries(store, embedder, "recursive", chunks, state, cache=cache,
                                    budget_tokens=args.budget, window=args.window)
            build_s = time.perf_counter() - started
            started = time.perf_counter()
            again = sync_summaries(store, embedder, "recursive", chunks, state, cache=cache,
                                   budget_tokens=args.budget, window=args.window)
            rebuild_s = time.perf_counter() - started
            summaries = [s.text for s in load_state(state).values() if s.text]

        per_1000 = 1000 / max(len(documents), 1)
        flat_bytes = _bytes([c.text for c in chunks], embedder.dimension)
        summary_bytes = _bytes(summaries, embedder.dimension)
        storage = {"flat_objects": flat.collection_size, "summary_objects": len(summaries),
                   "object_ratio": round(len(summaries) / max(flat.collection_size, 1), 3),
                   "flat_bytes": flat_bytes, "summary_bytes": summary_bytes,
                   "overhead": round(summary_bytes / max(flat_bytes, 1), 3)}

        with Ragloom(settings, vectors=store, embedder=embedder, llm=None) as rag:
            hybrid = get_retriever("hybrid", rag.context, "recursive", abstain=False, rerank=False)
            raptor = get_retriever("raptor", rag.context, "recursive", abstain=False, rerank=False)
            for q in queries[:5]:
                hybrid.search(q, k=10), raptor.search(q, k=10)
            base_ms, raptor_ms = [], []
            for q in queries:  # interleaved: load on the shared machine hits both alike
                base_ms += _timed(lambda q: hybrid.search(q, k=10), [q])
                raptor_ms += _timed(lambda q: raptor.search(q, k=10), [q])
    finally:
        if not args.keep:
            for name in ("recursive", summary_collection("recursive")):
                store.drop_collection(name)
        store.close()

    def p95(values: list[float]) -> float:
        return float(np.percentile(values, 95))

    added_median = statistics.median(raptor_ms) - statistics.median(base_ms)
    added_p95 = p95(raptor_ms) - p95(base_ms)
    build = {"documents": len(documents), "chunks": len(chunks), "sections": report.sections,
             "threads": usable_cpus(), "flat_index_s": round(flat_s, 2), "summary_build_s": round(build_s, 2),
             "summary_build_s_per_1000_docs": round(build_s * per_1000, 1),
             "flat_index_s_per_1000_docs": round(flat_s * per_1000, 1),
             "build_vs_flat": round(build_s / flat_s, 2) if flat_s else None,
             "unchanged_rebuild_s": round(rebuild_s, 2), "unchanged_rebuild_summarized": again.built}
    latency = {"queries": len(queries), "hybrid_median_ms": round(statistics.median(base_ms), 1),
               "hybrid_p95_ms": round(p95(base_ms), 1), "raptor_median_ms": round(statistics.median(raptor_ms), 1),
               "raptor_p95_ms": round(p95(raptor_ms), 1), "added_median_ms": round(added_median, 1),
               "added_p95_ms": round(added_p95, 1)}
    verdict = {"build": build["summary_build_s_per_1000_docs"] < BUILD_TARGET_S,
               "storage": storage["overhead"] <= STORAGE_TARGET, "latency": added_p95 < LATENCY_TARGET_MS}

    print(f"RAPTOR-lite on {args.dataset}: {len(documents)} documents, {len(chunks)} recursive chunks, "
          f"{report.sections} sections, summaries of <= {args.budget} words (extractive), {usable_cpus()} threads")
    print("| figure | RAPTOR-lite | baseline (same run) | target | met |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| build s per 1,000 docs | {build['summary_build_s_per_1000_docs']} | flat index "
          f"{build['flat_index_s_per_1000_docs']} | < {BUILD_TARGET_S:.0f} | {'yes' if verdict['build'] else 'MISS'} |")
    print(f"| storage (text + vectors) | {summary_bytes / 1e6:.2f} MB, {len(summaries)} objects | flat "
          f"{flat_bytes / 1e6:.2f} MB, {flat.collection_size} objects | <= 50% | "
          f"{storage['overhead']:.0%} {'yes' if verdict['storage'] else 'MISS'} |")
    print(f"| query ms median / p95 | raptor {latency['raptor_median_ms']} / {latency['raptor_p95_ms']} | hybrid "
          f"{latency['hybrid_median_ms']} / {latency['hybrid_p95_ms']} | added < {LATENCY_TARGET_MS:.0f} | "
          f"+{added_median:.1f} / +{added_p95:.1f} {'yes' if verdict['latency'] else 'MISS'} |")
    print(f"| unchanged rebuild | {rebuild_s:.2f} s, {again.built} sections summarized | | 0 summarized | "
          f"{'yes' if again.built == 0 else 'MISS'} |")
    for kind, figures in (("build", build), ("storage", storage), ("latency", latency)):
        print(json.dumps({"figure": kind, "dataset": args.dataset, **figures, "met": verdict.get(kind)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
