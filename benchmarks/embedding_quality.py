"""Retrieval quality of each embedding backend on SciFact: does int8 stay within 1 point of nDCG@10 of fp32?

Dense retrieval over whole abstracts (title + text) in numpy, scored with ranx against qrels.tsv, for
torch fp32 (the reference), onnx fp32 and onnx int8. Prints nDCG@10, recall@10, MRR@10, the encoding
speed of each backend, and a paired bootstrap 95% interval of each backend's nDCG@10 minus torch's.

    python benchmarks/embedding_quality.py [--data ../shared/data/scifact] [--backends torch,onnx,onnx-int8]
                                           [--documents N] [--queries N]
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np
from ranx import Qrels, Run, evaluate

from ragloom.embedding import make_embedder

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
METRICS = ["ndcg@10", "recall@10", "mrr@10"]


def load(data: Path) -> tuple[list[str], list[str], dict[str, str], dict[str, dict[str, int]]]:
    doc_ids, texts = [], []
    with (data / "corpus.jsonl").open() as f:
        for line in f:
            r = json.loads(line)
            doc_ids.append(r["_id"])
            texts.append(f"{r['title']}\n\n{r['text']}".strip())
    qrels: dict[str, dict[str, int]] = {}
    with (data / "qrels.tsv").open() as f:
        for row in csv.DictReader(f, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    queries = {}
    with (data / "queries.jsonl").open() as f:
        for line in f:
            q = json.loads(line)
            if q["_id"] in qrels:
                queries[q["_id"]] = q["text"]
    return doc_ids, texts, queries, qrels


def dense_run(doc_vectors: np.ndarray, query_vectors: np.ndarray, doc_ids: list[str], query_ids: list[str],
              k: int = 100) -> dict[str, dict[str, float]]:
    scores = query_vectors @ doc_vectors.T
    k = min(k, len(doc_ids))
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return {qid: {doc_ids[j]: float(scores[i, j]) for j in top[i]} for i, qid in enumerate(query_ids)}


def bootstrap_delta(a: np.ndarray, b: np.ndarray, rounds: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% interval of mean(a - b) over queries, resampling queries (paired)."""
    rng = np.random.default_rng(seed)
    diff = a - b
    means = np.array([diff[rng.integers(0, len(diff), len(diff))].mean() for _ in range(rounds)])
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--backends", default="torch,onnx,onnx-int8")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--documents", type=int, default=0, help="only the first N abstracts (0: all)")
    parser.add_argument("--queries", type=int, default=0, help="only the first N queries (0: all)")
    args = parser.parse_args()

    doc_ids, texts, queries, qrels_dict = load(args.data)
    doc_ids, texts = doc_ids[: args.documents or None], texts[: args.documents or None]
    query_ids = list(queries)[: args.queries or None]
    qrels = Qrels({q: qrels_dict[q] for q in query_ids})
    print(f"SciFact: {len(texts)} abstracts, {len(query_ids)} queries with qrels")
    results: dict[str, dict] = {}
    for backend in args.backends.split(","):
        embedder = make_embedder({"backend": backend, "batch_size": args.batch_size})
        started = time.perf_counter()
        doc_vectors = embedder.encode(texts)
        seconds = time.perf_counter() - started
        query_vectors = embedder.encode([queries[q] for q in query_ids])
        run = Run(dense_run(doc_vectors, query_vectors, doc_ids, query_ids))
        scores = evaluate(qrels, run, METRICS)
        per_query = evaluate(qrels, run, "ndcg@10", return_mean=False)
        results[backend] = {"scores": scores, "per_query": np.asarray(per_query), "docs_per_s": len(texts) / seconds,
                            "model_id": embedder.model_id}
        print(f"  {backend:<10} nDCG@10 {scores['ndcg@10']:.4f}  R@10 {scores['recall@10']:.4f}  "
              f"MRR@10 {scores['mrr@10']:.4f}  encode {len(texts) / seconds:6.1f} abstracts/s", flush=True)

    reference = "torch" if "torch" in results else next(iter(results))
    print(f"\n| backend | nDCG@10 | Δ vs {reference} (points) | 95% CI of Δ | R@10 | MRR@10 | abstracts/s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ref = results[reference]
    for backend, r in results.items():
        delta = 100 * (r["scores"]["ndcg@10"] - ref["scores"]["ndcg@10"])
        low, high = bootstrap_delta(r["per_query"], ref["per_query"])
        print(f"| {backend} | {r['scores']['ndcg@10']:.4f} | {delta:+.2f} | [{100 * low:+.2f}, {100 * high:+.2f}] | "
              f"{r['scores']['recall@10']:.4f} | {r['scores']['mrr@10']:.4f} | {r['docs_per_s']:.1f} |")
    fp32 = results.get("onnx", ref)
    if "onnx-int8" in results:
        loss = 100 * (fp32["scores"]["ndcg@10"] - results["onnx-int8"]["scores"]["ndcg@10"])
        verdict = "within" if loss <= 1.0 else "NOT within"
        print(f"\nonnx-int8 loses {loss:.2f} nDCG@10 points against fp32: {verdict} the 1-point budget")


if __name__ == "__main__":
    main()
