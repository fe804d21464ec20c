"""Retrieval quality of each embedding backend on a dev set: does a backend keep fp32's nDCG@10?

Dense retrieval in numpy over a dev set's units (SciFact and MuSiQue: whole documents, title + text; ObliQA:
its gold passages), scored with ranx against the qrels, for each variant. A variant is
``backend[@dtype][+query_backend[@dtype]]``: documents embedded by the first, queries by the second (default: the
same); ``auto`` is what ships (``make_embedder`` for the documents, ``make_embedder(..., short_texts=True)`` for
the queries). Prints nDCG@10, recall@10, MRR@10, each variant's document encoding speed, and a paired bootstrap 95%
interval of each variant's nDCG@10 minus the reference's (the first variant).

    python benchmarks/embedding_quality.py [--data ../shared/data/scifact] [--backends torch,onnx,onnx-int8]
                                           [--documents N] [--queries N]
    python benchmarks/embedding_quality.py --backends onnx-int8,auto,torch@bf16,torch@fp32 --data ../shared/data/obliqa
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from ranx import Qrels, Run, evaluate

from ragloom.embedding import make_embedder
from ragloom.evaluation.datasets import load_dataset

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
METRICS = ["ndcg@10", "recall@10", "mrr@10"]


def load(data: Path) -> tuple[list[str], list[str], dict[str, str], dict[str, dict[str, int]]]:
    """Unit ids, unit texts, queries (id -> text) with judgements, and the qrels: gold passages where the set
    has them, else whole documents."""
    dataset = load_dataset(data)
    if dataset.has_passages:
        text_of = {d.document_id: d.text for d in dataset.documents}
        ids = list(dataset.passages)
        texts = [text_of[p.document_id][p.start:p.end] for p in dataset.passages.values()]
        qrels = dataset.passage_qrels
    else:
        ids = [d.document_id for d in dataset.documents]
        texts = [(f"{d.title}\n\n{d.text}" if d.title != d.document_id else d.text).strip()
                 for d in dataset.documents]  # a record with no title takes its id as one
        qrels = dataset.qrels
    queries = {q.query_id: q.text for q in dataset.queries if q.query_id in qrels}
    return ids, texts, queries, {q: dict(rel) for q, rel in qrels.items() if q in queries}


def embedders(variant: str, batch_size: int):
    """(documents' embedder, queries' embedder) of a variant ``backend[@dtype][+backend[@dtype]]`` or ``auto``."""
    if variant == "auto":
        return (make_embedder({"batch_size": batch_size}),
                make_embedder({"batch_size": batch_size}, short_texts=True))
    built = []
    for side in variant.split("+"):
        backend, _, dtype = side.partition("@")
        built.append(make_embedder({"backend": backend, "dtype": dtype or "auto", "device": "cpu",
                                    "batch_size": batch_size}))
    return built[0], built[-1]


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
    parser.add_argument("--backends", default="torch,onnx,onnx-int8",
                        help="variants, comma-separated: backend[@dtype][+query_backend[@dtype]] or auto; the first "
                             "is the reference of the paired intervals")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--documents", type=int, default=0, help="only the first N units (0: all)")
    parser.add_argument("--queries", type=int, default=0, help="only the first N queries (0: all)")
    args = parser.parse_args()

    doc_ids, texts, queries, qrels_dict = load(args.data)
    doc_ids, texts = doc_ids[: args.documents or None], texts[: args.documents or None]
    query_ids = list(queries)[: args.queries or None]
    qrels = Qrels({q: qrels_dict[q] for q in query_ids})
    print(f"{args.data.name}: {len(texts)} units, {len(query_ids)} queries with qrels")
    results: dict[str, dict] = {}
    for variant in args.backends.split(","):
        documents, query_side = embedders(variant, args.batch_size)
        started = time.perf_counter()
        doc_vectors = documents.encode(texts)
        seconds = time.perf_counter() - started
        query_vectors = query_side.encode([queries[q] for q in query_ids])
        run = Run(dense_run(doc_vectors, query_vectors, doc_ids, query_ids))
        scores = evaluate(qrels, run, METRICS)
        per_query = evaluate(qrels, run, "ndcg@10", return_mean=False)
        results[variant] = {"scores": scores, "per_query": np.asarray(per_query), "docs_per_s": len(texts) / seconds,
                            "model_id": documents.model_id}
        print(f"  {variant:<22} nDCG@10 {scores['ndcg@10']:.4f}  R@10 {scores['recall@10']:.4f}  "
              f"MRR@10 {scores['mrr@10']:.4f}  encode {len(texts) / seconds:6.1f} units/s  "
              f"({documents.model_id} / {query_side.model_id})", flush=True)

    reference = next(iter(results))
    print(f"\n| variant | nDCG@10 | Δ vs {reference} | 95% CI of Δ | R@10 | MRR@10 | units/s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ref = results[reference]
    for variant, r in results.items():
        delta = r["scores"]["ndcg@10"] - ref["scores"]["ndcg@10"]
        low, high = bootstrap_delta(r["per_query"], ref["per_query"])
        print(f"| {variant} | {r['scores']['ndcg@10']:.4f} | {delta:+.4f} | [{low:+.4f}, {high:+.4f}] | "
              f"{r['scores']['recall@10']:.4f} | {r['scores']['mrr@10']:.4f} | {r['docs_per_s']:.1f} |")


if __name__ == "__main__":
    main()
