"""How ingestion cost grows: time and peak RSS of the vector lane at 1k, 5k and 20k chunks (SciFact + ObliQA).

The chunk pool is the recursive chunks of SciFact's abstracts and ObliQA's rulebooks, shuffled with a seed;
a size beyond the pool repeats it with distinct document and chunk ids (same texts, so same embedding
cost). Each size runs in a fresh process, so its peak RSS is its own: the process loads the model
(not timed), then ``sync_vectors`` embeds and writes every chunk into a fresh collection (timed; no
embedding cache unless --cache, so every chunk is really embedded) which is dropped afterwards.
Also reported: RSS after the model load, so the growth with size is visible apart from the model.

    python benchmarks/scaling.py [--sizes 1000,5000,20000] [--backend torch] [--cache] [--documents 0]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"


def log(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def chunk_pool(seed: int, documents_per_corpus: int = 0) -> list:
    """The shuffled pool; ``documents_per_corpus`` > 0 chunks only the first N documents of each corpus."""
    from ragloom.chunking import get_chunker
    from ragloom.evaluation.datasets import read_corpus

    cut = slice(documents_per_corpus or None)
    documents = read_corpus(DATA / "scifact" / "corpus.jsonl", "scifact")[cut] + \
        read_corpus(DATA / "obliqa" / "corpus.jsonl", "obliqa")[cut]
    chunks = get_chunker("recursive").chunk_many(documents)
    random.Random(seed).shuffle(chunks)
    return chunks


def take(pool: list, n: int) -> list:
    """``n`` chunks: the pool, then copies with distinct ids (``~r<k>`` on document and chunk id)."""
    from ragloom.types import sha256_hex

    out = list(pool[:n])
    repeat = 1
    while len(out) < n:
        for c in pool[: n - len(out)]:
            out.append(dataclasses.replace(c, document_id=f"{c.document_id}~r{repeat}",
                                           chunk_id=sha256_hex(f"{c.chunk_id}~r{repeat}")[:32]))
        repeat += 1
    return out


def phase_ingest(args: argparse.Namespace) -> dict:
    from ragloom.embedding import make_embedder
    from ragloom.indexing.vectors import sync_vectors
    from ragloom.settings import Settings
    from ragloom.stores.embedding_cache import EmbeddingCache
    from ragloom.stores.weaviate import WeaviateStore

    settings = Settings.from_env()
    settings = dataclasses.replace(settings, embed_backend=args.backend or settings.embed_backend,
                                   collection_prefix=f"{settings.collection_prefix}BenchScale{uuid.uuid4().hex[:8]}")
    with args.pool.open("rb") as handle:
        chunks = take(pickle.load(handle), args.size)
    embedder = make_embedder(settings)
    embedder.encode(["warm up"])
    cache = EmbeddingCache(settings.artifacts_dir / "embedding_cache") if args.cache else None
    rss_model = peak_rss_mb()
    with WeaviateStore.connect(settings) as store:
        try:
            started = time.perf_counter()
            report = sync_vectors(store, embedder, "recursive", chunks, cache=cache)
            seconds = time.perf_counter() - started
        finally:
            store.drop_collection("recursive")
    return {"chunks": len(chunks), "seconds": seconds, "chunks_per_s": len(chunks) / seconds,
            "embed_seconds": report.embed_seconds, "write_seconds": report.write_seconds,
            "embedded": report.embedded, "cache_hits": report.cache_hits, "backend": settings.embed_backend,
            "rss_after_model_mb": rss_model, "peak_rss_mb": peak_rss_mb()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,5000,20000", help="chunk counts, comma-separated")
    parser.add_argument("--backend", default="", help="embedding backend (default: RAGLOOM_EMBED_BACKEND)")
    parser.add_argument("--cache", action="store_true", help="use the shared embedding cache (not a cold ingest)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--documents", type=int, default=0,
                        help="build the pool from the first N documents of each corpus (0 = all; the smoke's size)")
    parser.add_argument("--phase", choices=["ingest"], help=argparse.SUPPRESS)
    parser.add_argument("--pool", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.phase == "ingest":
        # a killed run (run_all --timeout) still drops its collection: SIGTERM unwinds through `finally`
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        print(json.dumps(phase_ingest(args)))
        return 0

    from ragloom import stack
    from ragloom.settings import Settings

    stack.up(Settings.from_env())
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    started = time.perf_counter()
    pool = chunk_pool(args.seed, args.documents)
    log(f"chunk pool: {len(pool)} recursive chunks of SciFact + ObliQA ({time.perf_counter() - started:.1f}s)")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        pool_file = Path(tmp) / "pool.pkl"
        with pool_file.open("wb") as handle:
            pickle.dump(pool, handle)
        for size in sizes:
            log(f"{size} chunks: fresh process")
            cmd = [sys.executable, __file__, "--phase", "ingest", "--pool", str(pool_file), "--size", str(size),
                   "--backend", args.backend] + (["--cache"] if args.cache else [])
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"size {size} failed ({out.returncode}):\n{out.stderr[-3000:]}")
            result = {"benchmark": "scaling", "pool": len(pool), **json.loads(out.stdout.strip().splitlines()[-1])}
            results.append(result)
            print(json.dumps(result), flush=True)

    base = results[0]
    print(f"\n{'chunks':>7}{'seconds':>9}{'chunks/s':>10}{'time x':>8}{'size x':>8}{'RSS model MB':>14}"
          f"{'peak RSS MB':>13}{'RSS growth MB':>15}")
    for r in results:
        print(f"{r['chunks']:>7}{r['seconds']:>9.1f}{r['chunks_per_s']:>10.1f}{r['seconds'] / base['seconds']:>8.2f}"
              f"{r['chunks'] / base['chunks']:>8.1f}{r['rss_after_model_mb']:>14.0f}{r['peak_rss_mb']:>13.0f}"
              f"{r['peak_rss_mb'] - r['rss_after_model_mb']:>15.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
