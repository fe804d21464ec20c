"""How ingestion cost grows: time and peak RSS of the vector lane at 1k, 5k and 20k chunks (SciFact + ObliQA).

The chunk pool is the recursive chunks of SciFact's abstracts and ObliQA's rulebooks, shuffled with a seed;
a size beyond the pool repeats it with distinct document and chunk ids (same texts, so same embedding
cost). Each size runs in a fresh process, so its peak RSS is its own: the process loads the model
(not timed), then ``sync_vectors`` embeds and writes every chunk into a fresh collection (timed; no
embedding cache unless --cache, so every chunk is really embedded) which is dropped afterwards.
Also reported: RSS after the model load, so the growth with size is visible apart from the model.

    python benchmarks/scaling.py [--sizes 1000,5000,20000] [--backend torch] [--cache] [--documents 0]

``--precomputed`` measures the store side alone at sizes the embedder cannot reach here (1M chunks would take
hours on 2 cores): one collection grows step by step to each size in ``--sizes`` (e.g. 100000,1000000) from
the same pool, each chunk written with the pool's cached vector (the embedding cache must hold the pool:
run a cached ingest of it once) plus seeded Gaussian noise for every copy after the first (cosine ~0.98 to
its original: exact duplicates would make a degenerate HNSW graph). Per step: the write rate (Weaviate
indexes on insert: write rate = index rate), Weaviate's RSS and data on disk, and p50 / p95 of the hybrid
and dense strategies (defaults, post-processing included) over SciFact claims, next to one bare near-vector
call. A step whose projected Weaviate RSS passes ``--max-weaviate-gb`` is skipped, and said so.

    python benchmarks/scaling.py --precomputed --sizes 100000,300000,1000000 [--queries 100] [--keep]
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


NOISE = 0.008  # per-dimension sigma of the copies' perturbation: cosine ~0.98 to the original (384 dimensions)


def _rss_mb(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _disk_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20 if path.is_dir() else float("nan")


def _percentiles(times: list[float]) -> tuple[float, float]:
    import numpy as np

    return float(np.percentile(times, 50)), float(np.percentile(times, 95))


def precomputed(args: argparse.Namespace) -> int:
    """The store side at large sizes: cached vectors (perturbed per copy) written straight to one collection."""
    import numpy as np

    from ragloom import stack
    from ragloom.embedding import make_embedder
    from ragloom.evaluation.datasets import load_dataset
    from ragloom.settings import Settings
    from ragloom.stores.embedding_cache import EmbeddingCache
    from ragloom.stores.weaviate import WeaviateStore
    from ragloom.types import sha256_hex

    base = Settings.from_env()
    stack.up(base)
    settings = dataclasses.replace(base, collection_prefix=f"{base.collection_prefix}BenchScaleStore")
    embedder = make_embedder(settings)
    pool = chunk_pool(args.seed, args.documents)
    hits, misses = EmbeddingCache(settings.artifacts_dir / "embedding_cache").get_many(
        embedder.model_id, [c.embed_text for c in pool])
    pool = [c for i, c in enumerate(pool) if i in hits]
    vectors = np.stack([hits[i] for i in sorted(hits)]).astype(np.float32)
    log(f"pool: {len(pool)} chunks with cached vectors ({len(misses)} without: left out)")
    if not pool:
        raise SystemExit("the embedding cache holds none of the pool: run `python benchmarks/scaling.py --cache "
                         "--sizes 20000` (or any cached ingest of SciFact + ObliQA) first")
    claims = [q.text for q in load_dataset(DATA / "scifact").queries][: args.queries]
    query_vectors = embedder.encode(claims)
    pid = stack.status(base)["weaviate"]["managed_pid"]
    data_dir = base.stack_dir / "weaviate"
    rng = np.random.default_rng(args.seed)
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    rows: list[dict] = []
    written = 0
    with WeaviateStore.connect(settings) as store:
        store.drop_collection("recursive")
        store.ensure_collection("recursive", vectors.shape[1], model_id=embedder.model_id)
        rss_empty, disk_empty = _rss_mb(pid), _disk_mb(data_dir)
        try:
            for size in sizes:
                if rows and rows[-1]["chunks"] >= 50_000:  # small steps still fill memtables: no projection
                    per_chunk = (rows[-1]["weaviate_rss_mb"] - rss_empty) / rows[-1]["chunks"]
                    projected = (rss_empty + per_chunk * size) / 1024
                    if projected > args.max_weaviate_gb:
                        log(f"{size} chunks: skipped, projected Weaviate RSS {projected:.1f} GB > "
                            f"--max-weaviate-gb {args.max_weaviate_gb}")
                        rows.append({"chunks": size, "skipped": f"projected Weaviate RSS {projected:.1f} GB"})
                        break
                started = time.perf_counter()
                batch = 2000
                while written < size:
                    n = min(batch, size - written)
                    index = np.arange(written, written + n)
                    copy, row = index // len(pool), index % len(pool)
                    chunks = [c if k == 0 else dataclasses.replace(
                        c, document_id=f"{c.document_id}~r{k}", chunk_id=sha256_hex(f"{c.chunk_id}~r{k}")[:32])
                        for c, k in ((pool[r], int(k)) for r, k in zip(row, copy, strict=True))]
                    block = vectors[row] + np.where(copy[:, None] > 0,
                                                    rng.normal(0, NOISE, (n, vectors.shape[1])), 0.0)
                    block /= np.linalg.norm(block, axis=1, keepdims=True)
                    store.upsert_chunks("recursive", chunks, block.astype(np.float32))
                    written += n
                    if written % 50000 < batch:
                        log(f"{written} chunks written ({time.perf_counter() - started:.0f}s into this step)")
                seconds = time.perf_counter() - started
                step = size - (rows[-1]["chunks"] if rows and "skipped" not in rows[-1] else 0)
                row = {"chunks": size, "step_chunks": step, "write_s": seconds, "write_per_s": step / seconds,
                       "weaviate_rss_mb": _rss_mb(pid), "disk_mb": _disk_mb(data_dir) - disk_empty}
                row.update(_query_times(settings, embedder, claims, query_vectors))
                row["load"] = Path("/proc/loadavg").read_text().split()[0]
                rows.append(row)
                print(json.dumps({"benchmark": "scaling_precomputed", **row}), flush=True)
        finally:
            if not args.keep:
                store.drop_collection("recursive")
    print(f"\n{'chunks':>9}{'write/s':>9}{'Weaviate RSS MB':>17}{'disk MB':>9}{'near-vector p50/p95':>21}"
          f"{'dense p50/p95':>16}{'hybrid p50/p95':>17}{'load':>6}")
    for r in rows:
        if "skipped" in r:
            print(f"{r['chunks']:>9}  skipped: {r['skipped']}")
            continue
        print(f"{r['chunks']:>9}{r['write_per_s']:>9.0f}{r['weaviate_rss_mb']:>17.0f}{r['disk_mb']:>9.0f}"
              f"{r['bare_p50_ms']:>12.1f} / {r['bare_p95_ms']:<6.1f}"
              f"{r['dense_p50_ms']:>8.1f} / {r['dense_p95_ms']:<5.1f}"
              f"{r['hybrid_p50_ms']:>9.1f} / {r['hybrid_p95_ms']:<5.1f}{r['load']:>6}")
    return 0


def _query_times(settings, embedder, claims: list[str], query_vectors) -> dict:
    """p50 / p95 ms of a bare near-vector call and of the dense and hybrid strategies (query embedding
    included, as a user sees it), taking turns on each claim after a warm-up."""
    from ragloom.api import Ragloom
    from ragloom.filters import build_where
    from ragloom.types import Scope

    with Ragloom(settings) as rag:  # its own query embedder, as shipped (one thread: ragloom.api)
        store = rag.context.vectors
        where = build_where(Scope())
        runs = {"bare": lambda i: store.near_vector("recursive", query_vectors[i], 10, where=where)}
        for name in ("dense", "hybrid"):
            retriever = rag.retriever(name)
            runs[name] = lambda i, r=retriever: r.search(claims[i], k=10)
        for i in range(min(10, len(claims))):
            for run in runs.values():
                run(i)
        times: dict[str, list[float]] = {name: [] for name in runs}
        for i in range(len(claims)):
            for name, run in runs.items():
                started = time.perf_counter()
                run(i)
                times[name].append((time.perf_counter() - started) * 1000)
    out = {}
    for name, values in times.items():
        out[f"{name}_p50_ms"], out[f"{name}_p95_ms"] = _percentiles(values)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,5000,20000", help="chunk counts, comma-separated")
    parser.add_argument("--backend", default="", help="embedding backend (default: RAGLOOM_EMBED_BACKEND)")
    parser.add_argument("--cache", action="store_true", help="use the shared embedding cache (not a cold ingest)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--documents", type=int, default=0,
                        help="build the pool from the first N documents of each corpus (0 = all; the smoke's size)")
    parser.add_argument("--precomputed", action="store_true",
                        help="grow one collection with the pool's cached vectors (no embedding) to each size")
    parser.add_argument("--queries", type=int, default=100, help="--precomputed: queries timed per step")
    parser.add_argument("--max-weaviate-gb", type=float, default=5.0,
                        help="--precomputed: skip a step whose projected Weaviate RSS passes this")
    parser.add_argument("--keep", action="store_true", help="--precomputed: keep the collection afterwards")
    parser.add_argument("--phase", choices=["ingest"], help=argparse.SUPPRESS)
    parser.add_argument("--pool", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.precomputed:
        return precomputed(args)
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
