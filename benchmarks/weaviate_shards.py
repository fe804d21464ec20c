"""Ranking in one Weaviate collection split into shards, against one shard: the cost in retrieval of the only way
past one shard's write ceiling (docs/experiments/2026-11-27-gpu-writer-processes.md).

Weaviate computes BM25's document count and mean length per shard (weaviate/weaviate#2918), and each shard ranks
its own candidates, so BM25 and hybrid rank differently over several shards; the dense lane reads the same vectors.
The script writes one dataset's recursive chunks (vectors from the embedding cache) into a collection of each
shard count, runs every query through the store's bm25, dense and hybrid searches, and scores each as `ragloom eval`
scores documents (nDCG@10), with the paired difference from the first shard count and its 95% bootstrap CI.

    python benchmarks/weaviate_shards.py --data ../shared/data/musique [--shards 1,4] [--documents 0] [--queries 0]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

LANES = ("bm25", "dense", "hybrid")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "musique")
    parser.add_argument("--shards", default="1,4", help="shard counts; the first is the baseline")
    parser.add_argument("--documents", type=int, default=0, help="corpus documents kept (0: all)")
    parser.add_argument("--queries", type=int, default=0, help="queries sampled (0: all)")
    args = parser.parse_args()

    from weaviate.classes.config import Configure

    from ragloom import stack
    from ragloom.chunking import RecursiveChunker
    from ragloom.embedding import make_embedder
    from ragloom.evaluation.datasets import load_dataset
    from ragloom.evaluation.metrics import Hit, document_scores, paired_difference_ci
    from ragloom.indexing.compose import cache_folder
    from ragloom.indexing.vectors import encode_cached
    from ragloom.settings import Settings
    from ragloom.stores.embedding_cache import EmbeddingCache
    from ragloom.stores.weaviate import WeaviateStore

    settings = stack.up(Settings.from_env())
    dataset = load_dataset(args.data, max_queries=args.queries or None, corpus_limit=args.documents or None)
    chunks = RecursiveChunker().chunk_many(dataset.documents)
    embedder = make_embedder(settings)
    vectors, cached = encode_cached(embedder, EmbeddingCache(cache_folder(settings.artifacts_dir)),
                                    [c.embed_text for c in chunks])
    query_vectors = embedder.encode([q.text for q in dataset.queries])
    print(f"{args.data.name}: {len(dataset.documents)} documents, {len(chunks)} chunks ({cached} vectors cached), "
          f"{len(dataset.queries)} queries", flush=True)

    shard_counts = [int(n) for n in args.shards.split(",") if n]
    scores: dict[int, dict[str, object]] = {}
    top10: dict[int, dict[str, list[list[str]]]] = {}
    for shards in shard_counts:
        store = WeaviateStore.connect(replace(settings, collection_prefix=f"BenchShards{uuid.uuid4().hex[:8]}"))
        # ragloom's own schema, created with this many shards
        store.client.collections.create = lambda *a, n=shards, create=store.client.collections.create, **k: create(
            *a, sharding_config=Configure.sharding(desired_count=n), **k)
        try:
            store.ensure_collection("recursive", embedder.dimension, model_id=embedder.model_id)
            config = store.client.collections.use(store.collection_name("recursive")).config.get()
            started = time.perf_counter()
            store.upsert_chunks("recursive", chunks, vectors)
            written = time.perf_counter() - started
            runs: dict[str, dict[str, list]] = {lane: {} for lane in LANES}
            for query, vector in zip(dataset.queries, query_vectors, strict=True):
                found = {"bm25": store.bm25("recursive", query.text, k=30),
                         "dense": store.near_vector("recursive", vector, k=30),
                         "hybrid": store.hybrid("recursive", query.text, vector, k=30)}
                for lane, items in found.items():
                    runs[lane][query.query_id] = [Hit(i.chunk_id, i.document_id) for i in items]
            scores[shards] = {lane: document_scores(runs[lane], dataset.qrels)["ndcg@10"] for lane in LANES}
            top10[shards] = {lane: [[h.document_id for h in runs[lane][q.query_id][:10]] for q in dataset.queries]
                             for lane in LANES}
            print(f"shards {config.sharding_config.desired_count}: {len(chunks)} chunks written in {written:.1f}s "
                  f"(one upsert call)", flush=True)
        finally:
            store.drop_collections()
            store.close()

    base = shard_counts[0]
    for shards in shard_counts[1:]:
        for lane in LANES:
            difference = paired_difference_ci(scores[shards][lane], scores[base][lane])
            moved = sum(a != b for a, b in zip(top10[base][lane], top10[shards][lane], strict=True))
            print(f"{lane:7s} nDCG@10 {base} shard(s) {scores[base][lane].mean():.4f}, {shards} shards "
                  f"{scores[shards][lane].mean():.4f}: {difference.mean:+.4f} [{difference.low:+.4f}, "
                  f"{difference.high:+.4f}]; top-10 documents in another order or set on {moved} of "
                  f"{len(dataset.queries)} queries", flush=True)


if __name__ == "__main__":
    main()
