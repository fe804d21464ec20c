"""What the LLM layer adds per query: latency and tokens of each query transform and each generation strategy
against plain hybrid retrieval measured in the same run, and the answer cache's hit latency.

    python benchmarks/llm_overhead.py [--queries 10] [--corpus 300] [--max-tokens 96] [--cache-hits 200]

Uses the configured endpoint (RAGLOOM_LLM_*), else starts the local llama-server (`ragloom stack up --llm`:
Gemma 3 270M, one thread). SciFact claims over a cut of the corpus are indexed into their own collections
(prefix ``<RAGLOOM_COLLECTION_PREFIX>BenchLLM<random>``, dropped at the end). Every row is the median over
the same queries; "added" is the row's median minus plain hybrid's. Answers here are from a tiny base model:
the figures are costs, not quality. Quality needs a real endpoint and ``ragloom eval --transforms``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
import uuid
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data" / "scifact"
TRANSFORMS = ("prf", "reformulate", "multi_query", "hyde", "step_back", "decompose")
GENERATIONS = ("simple", "cot", "reflect")
CACHE_HIT_TARGET_P95_MS = 5.0


def p95(values: list[float]) -> float:
    return float(np.percentile(np.asarray(values), 95))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--corpus", type=int, default=300, help="documents indexed (the queries' gold ones kept)")
    parser.add_argument("--max-tokens", type=int, default=96, help="generated tokens per answer")
    parser.add_argument("--cache-hits", type=int, default=200, help="cache lookups timed for the hit latency")
    parser.add_argument("--cache-only", action="store_true", help="only the answer cache figures")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from ragloom import stack
    from ragloom.api import Ragloom
    from ragloom.chunking import get_chunker
    from ragloom.embedding import make_embedder
    from ragloom.evaluation.datasets import load_dataset
    from ragloom.indexing.vectors import sync_vectors
    from ragloom.llm import cache_key
    from ragloom.settings import Settings
    from ragloom.stores.embedding_cache import EmbeddingCache
    from ragloom.stores.weaviate import WeaviateStore

    settings = stack.up(Settings.from_env(), llm=True)
    prefix = f"{settings.collection_prefix}BenchLLM{uuid.uuid4().hex[:8]}"
    settings = dataclasses.replace(settings, collection_prefix=prefix, llm_max_tokens=args.max_tokens)
    data = load_dataset(DATA, max_queries=args.queries, corpus_limit=args.corpus, seed=13)
    questions = [q.text for q in data.queries]
    embedder = make_embedder(settings)
    vectors = WeaviateStore.connect(settings)
    rows: list[dict] = []
    try:
        chunks = get_chunker("recursive").chunk_many(data.documents)
        sync_vectors(vectors, embedder, "recursive", chunks,
                     cache=EmbeddingCache(settings.artifacts_dir / "embedding_cache"))
        print(f"indexed {len(data.documents)} documents ({len(chunks)} chunks); {len(questions)} queries; "
              f"model {settings.llm_model or '?'} at {settings.llm_base_url}, max_tokens {args.max_tokens}",
              flush=True)
        import tempfile

        with tempfile.TemporaryDirectory() as tmp, \
                Ragloom(dataclasses.replace(settings, data_dir=Path(tmp)), vectors=vectors, embedder=embedder) as rag:
            rag.warm("hybrid")
            rag.query(questions[0])  # first-call costs out of the way

            def measure(label: str, run) -> None:
                times, tokens_in, tokens_out, failures = [], [], [], 0
                for q in questions:
                    started = time.perf_counter()
                    t_in, t_out, failed = run(q)
                    times.append((time.perf_counter() - started) * 1000)
                    tokens_in.append(t_in)
                    tokens_out.append(t_out)
                    failures += failed
                rows.append({"row": label, "median_ms": statistics.median(times), "p95_ms": p95(times),
                             "tokens_in": statistics.median(tokens_in), "tokens_out": statistics.median(tokens_out),
                             "failed": failures})
                print(f"  {label:24} median {rows[-1]['median_ms']:8.1f} ms", flush=True)

            def plain(q: str) -> tuple[int, int, int]:
                rag.query(q, k=5)
                return 0, 0, 0

            def transformed(name: str):
                def run(q: str) -> tuple[int, int, int]:
                    result = rag.query(q, k=5, transforms=[name])
                    report = result.metadata.details["transforms"][name]
                    return report["tokens_in"], report["tokens_out"], int(report["error"] is not None)
                return run

            def asked(generation: str):
                def run(q: str) -> tuple[int, int, int]:
                    answer = rag.ask(q, k=5, generation=generation, use_cache=False)
                    return answer.tokens_in, answer.tokens_out, int(not answer.answer)
                return run

            measure("hybrid (baseline)", plain)
            for name in () if args.cache_only else TRANSFORMS:
                measure(f"hybrid + {name}", transformed(name))
            for generation in () if args.cache_only else GENERATIONS:
                measure(f"ask {generation}", asked(generation))

            # the cache: each question answered once (stored), then asked again and again (hits)
            for q in questions:
                rag.ask(q, k=5, generation="simple")
            hits: list[dict] = []
            while len(hits) < args.cache_hits:
                hits += [rag.ask(q, k=5, generation="simple").latency_ms for q in questions]
            cached = [rag.ask(q, k=5, generation="simple").cached for q in questions]
            # the lookup alone (key + SQLite read), outside ask: what the cache itself costs
            cache = rag.answer_cache
            passages = [(f"{i:032x}", "0" * 64) for i in range(5)]
            params = {"generation": "simple", "max_tokens": args.max_tokens}
            cache.put(cache_key("bench", params, questions[0], passages), {"answer": "x [1]"})
            alone = []
            for _ in range(args.cache_hits * 10):
                started = time.perf_counter()
                assert cache.get(cache_key("bench", params, questions[0], passages)) is not None
                alone.append((time.perf_counter() - started) * 1000)
    finally:
        vectors.drop_collections()
        vectors.close()

    base = rows[0]
    print(f"\n{'row':24} {'median ms':>10} {'added ms':>9} {'x hybrid':>8} {'p95 ms':>8} {'tok in':>7} "
          f"{'tok out':>7} {'failed':>6}")
    for r in rows:
        print(f"{r['row']:24} {r['median_ms']:10.1f} {r['median_ms'] - base['median_ms']:9.1f} "
              f"{r['median_ms'] / base['median_ms']:8.1f} {r['p95_ms']:8.1f} {r['tokens_in']:7.0f} "
              f"{r['tokens_out']:7.0f} {r['failed']:6d}")
    lookup = [h["cache_lookup"] for h in hits]
    total = [h["total"] for h in hits]
    print(f"\nanswer cache hits ({len(lookup)}; all hits: {all(cached)}): lookup (key + SQLite read) median "
          f"{statistics.median(lookup):.3f} ms, p95 {p95(lookup):.3f} ms (target <= {CACHE_HIT_TARGET_P95_MS} ms: "
          f"{'met' if p95(lookup) <= CACHE_HIT_TARGET_P95_MS else 'MISSED'}); whole cached ask (retrieval "
          f"included) median {statistics.median(total):.1f} ms, p95 {p95(total):.1f} ms; the lookup alone "
          f"({len(alone)} times): median {statistics.median(alone):.3f} ms, p95 {p95(alone):.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
