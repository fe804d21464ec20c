"""What a stored chunk's size costs a hybrid query: Weaviate's CPU per call on objects as ragloom writes them, against
the same chunks written with ``embed_text`` as well (the object shape before 2026-11-28).

Weaviate answers a hybrid call by decoding every object of both searches' pools (100 each by default), the BM25
one's whole, whatever the call asks to return (docs/experiments/2026-11-28-weaviate-hybrid-pool.md). So each byte
a chunk object stores is read on every query that pools it. This script writes SciFact's recursive chunks into
two collections of the stack's Weaviate, through ragloom's own sync (vectors from the embedding cache), one as
shipped and one with ``embed_text`` stored as it was; then calls hybrid, ids only and under a scope filter as
the API sends, on both in alternating bursts, and prints Weaviate's CPU per call (median of the bursts), the
stored property bytes per object, and on how many calls both collections gave the same ids and scores (chunks of
equal score in either order), for BM25 alone and for hybrid. BM25 must agree on every call: its index does not
depend on what else an object stores. Hybrid agrees on every call where the vector search is exact (a small
collection searched flat), and may differ on a few where it runs on HNSW, whose graph two collections build
differently from the same objects.

    python benchmarks/weaviate_object_size.py [--corpus-limit 500] [--queries 0] [--calls 200] [--bursts 8]
                                             [--k 10,50] [--drop] [--prefix BenchObject]

Needs the stack up (`python -m ragloom stack up`). The collections (``<prefix>Shipped``, ``<prefix>Previous``) are
kept for a re-run unless ``--drop``. A re-run with another ``--corpus-limit`` deletes objects, and HNSW answers on
what it deleted differ between the two collections: drop them between sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
SHAPES = ("shipped", "previous")
SCOPE = "bench"  # the service benchmark's scope: its filter reads the shared scope's chunks too


@contextmanager
def shape(name: str):
    """Chunks written inside carry the ``shipped`` properties, or also ``embed_text`` (``previous``)."""
    from ragloom.stores.weaviate import schema, writes

    if name == "shipped":
        yield
        return
    shipped = writes.object_properties

    def previous(chunk, layout):
        return {**shipped(chunk, layout), "embed_text": chunk.embed_text}

    schema.CORE_PROPERTIES["embed_text"] = ("TEXT", "WORD", False, False)
    writes.object_properties = previous
    try:
        yield
    finally:
        writes.object_properties = shipped
        del schema.CORE_PROPERTIES["embed_text"]


def stored_bytes(store, strategy: str, sample: int = 200) -> float:
    """Mean JSON bytes of the properties of ``sample`` stored objects."""
    collection = store.client.collections.get(store.collection_name(strategy))
    objects = collection.query.fetch_objects(limit=sample).objects
    return float(np.mean([len(json.dumps(o.properties, default=str)) for o in objects]))


def agreeing(these: list[list[tuple[str, float]]], those: list[list[tuple[str, float]]]) -> int:
    """Calls whose two answers have the same scores, rank by rank, and the same chunk at each score, where chunks
    of equal score may come in either order, and a tie at the last rank may be cut at another chunk (Weaviate
    breaks a tie by its internal document number, which follows write order)."""
    def agree(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> bool:
        if [s for _, s in a] != [s for _, s in b]:
            return False
        last = a[-1][1] if a else 0.0
        return all({i for i, s in a if s == score} == {i for i, s in b if s == score}
                   for score in {s for _, s in a if s != last})
    return sum(agree(a, b) for a, b in zip(these, those, strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--corpus-limit", type=int, default=500, help="abstracts (0: all)")
    parser.add_argument("--queries", type=int, default=0,
                        help="claims sampled (0: all; the corpus always holds their relevant abstracts)")
    parser.add_argument("--calls", type=int, default=200, help="hybrid calls per burst (the first claims)")
    parser.add_argument("--bursts", type=int, default=8, help="bursts per shape and k, alternating shapes")
    parser.add_argument("--k", default="10,50", help="limits asked (graph_rag's lane asks for 50)")
    parser.add_argument("--drop", action="store_true", help="delete the collections afterwards")
    parser.add_argument("--prefix", default="BenchObject", help="collection prefix (Shipped and Previous follow)")
    args = parser.parse_args()
    ks = [int(k) for k in args.k.split(",") if k]

    from ragloom.chunking import get_chunker
    from ragloom.embedding import make_embedder
    from ragloom.evaluation.datasets import load_dataset
    from ragloom.filters import scope_condition
    from ragloom.indexing.vectors import sync_vectors
    from ragloom.settings import Settings
    from ragloom.stores.embedding_cache import EmbeddingCache
    from ragloom.stores.weaviate import WeaviateStore
    from ragloom.types import Scope

    settings = Settings.from_env()
    dataset = load_dataset(args.data, max_queries=args.queries or None, corpus_limit=args.corpus_limit or None, seed=7)
    chunks = get_chunker("recursive").chunk_many(dataset.documents)  # the shared scope: every query reads it
    embedder = make_embedder(settings)
    cache = EmbeddingCache(settings.artifacts_dir / "embedding_cache")
    queries = [q.text for q in dataset.queries][: args.calls]
    vectors = make_embedder(settings, short_texts=True).encode(queries)
    where = scope_condition(Scope.from_path(SCOPE))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from service_load import CpuMeter  # finds the servers by the ports they listen on, however they were started

    if "weaviate" not in CpuMeter(settings).groups:
        sys.exit(f"no Weaviate listens on port {settings.weaviate_http_port}: run `python -m ragloom stack up`")
    print(f"{len(chunks)} chunks, {len(queries)} claims; {os.cpu_count()} CPUs; load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)

    stores = {}
    for name in SHAPES:
        store = WeaviateStore.connect(replace(settings, collection_prefix=args.prefix + name.title()))
        with shape(name):
            sync_vectors(store, embedder, "recursive", chunks, cache=cache, log=lambda m: None)
        stores[name] = store
        print(f"{name}: {stored_bytes(store, 'recursive'):.0f} property bytes per stored object", flush=True)

    cpu: dict[tuple[str, int], list[float]] = {}
    answers: dict[tuple[str, int], list] = {}
    try:
        keyword = {name: [[(i.chunk_id, round(i.score, 6))
                           for i in store.bm25("recursive", text, max(ks), where=where, ids_only=True)]
                          for text in queries] for name, store in stores.items()}
        for k in ks:
            for store in stores.values():  # warm-up
                for text, vector in zip(queries[:20], vectors[:20], strict=True):
                    store.hybrid("recursive", text, vector, k, where=where, ids_only=True)
            for _ in range(args.bursts):
                for name, store in stores.items():
                    with CpuMeter(settings) as meter:
                        got = [[(i.chunk_id, round(i.score, 6)) for i in
                                store.hybrid("recursive", text, vector, k, where=where, ids_only=True)]
                               for text, vector in zip(queries, vectors, strict=True)]
                    cpu.setdefault((name, k), []).append(meter.per_query_ms(len(queries))["weaviate"])
                    answers.setdefault((name, k), got)
    finally:
        for store in stores.values():
            if args.drop:
                store.drop_collection("recursive")
            store.close()

    print(f"\nWeaviate CPU ms per hybrid call, ids only, scope filter (median of {args.bursts} bursts of "
          f"{len(queries)}; load average {os.getloadavg()[0]:.2f}):")
    for k in ks:
        shipped, previous = (float(np.median(cpu[n, k])) for n in SHAPES)
        same = agreeing(answers["shipped", k], answers["previous", k])
        ratio = f"{shipped / previous:.3f}x" if previous > 0 else "no ratio (CPU below the clock's tick)"
        print(f"  k {k}: shipped {shipped:.2f}, previous {previous:.2f}: {ratio}; "
              f"bursts shipped {' '.join(f'{c:.2f}' for c in cpu['shipped', k])}, "
              f"previous {' '.join(f'{c:.2f}' for c in cpu['previous', k])}; "
              f"the same ids and scores on {same} of {len(queries)} calls")
    same = agreeing(keyword["shipped"], keyword["previous"])
    print(f"BM25 alone, k {max(ks)}: the same ids and scores on {same} of {len(queries)} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
