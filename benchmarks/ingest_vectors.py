"""Vector-lane ingestion speed and memory on SciFact, against plain sentence-transformers in the same run.

Prints: chunks/s of plain sentence-transformers PyTorch encoding (the baseline: median of random samples
encoded before and after the ingestion), chunks/s of ragloom's embed + Weaviate write (``sync_vectors``
into a fresh collection with an empty embedding cache), their ratio, the time of a no-op re-ingestion and
its speed-up, and peak RSS at several corpus sizes. The embedder alone on the same chunks and batches (no
store, no cache) runs in the same run, so embed-only and embed + write compare directly. Each measurement
runs in its own process so peak RSS belongs to it alone; model loading and chunking are excluded from every
timing. Targets (2 cores): ratio >= 3, embed + write >= 150 chunks/s, no-op >= 50x.

    python benchmarks/ingest_vectors.py [--backend onnx-int8] [--documents 0] [--sizes 0.1,0.3]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

import psutil

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
STRATEGY = "recursive"


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def _load_chunks(path: Path, fraction: float = 1.0) -> list:
    with path.open("rb") as f:
        chunks = pickle.load(f)
    if fraction >= 1.0:
        return chunks
    docs = list(dict.fromkeys(c.document_id for c in chunks))
    keep = set(docs[: max(1, int(len(docs) * fraction))])
    return [c for c in chunks if c.document_id in keep]


# phases (each in a child process) ------------------------------------------------------------------------
def phase_baseline(args: argparse.Namespace) -> dict:
    from sentence_transformers import SentenceTransformer

    from ragloom.embedding.base import resolve_model_path

    texts = [c.embed_text for c in _load_chunks(args.chunks)]
    model = SentenceTransformer(resolve_model_path(), device="cpu")
    batch = args.embed_batch or 64  # sentence-transformers' own default is 32; the issue's figures used 64
    model.encode(texts[:32], batch_size=batch)  # warm-up
    rng = random.Random(0)
    rates = []
    for _ in range(args.baseline_reps):
        sample = rng.sample(texts, args.baseline_chunks)
        started = time.perf_counter()
        model.encode(sample, batch_size=batch)
        rates.append(len(sample) / (time.perf_counter() - started))
    return {"rates": rates, "peak_rss_mb": _peak_rss_mb()}


def phase_embed(args: argparse.Namespace) -> dict:
    """The embedder alone on the chunks the ingestion embeds, in the same batches, no store and no cache."""
    from ragloom.embedding import make_embedder

    texts = sorted((c.embed_text for c in _load_chunks(args.chunks, args.fraction)), key=len)  # as sync_vectors
    embedder = make_embedder({"backend": args.backend, "batch_size": args.embed_batch})
    embedder.encode(["warm-up"] * 8)
    started = time.perf_counter()
    for begin in range(0, len(texts), args.batch_size):
        embedder.encode(texts[begin:begin + args.batch_size])
    return {"chunks": len(texts), "seconds": time.perf_counter() - started, "peak_rss_mb": _peak_rss_mb()}


def phase_ingest(args: argparse.Namespace) -> dict:
    from ragloom import stack
    from ragloom.embedding import make_embedder
    from ragloom.indexing.vectors import sync_vectors
    from ragloom.settings import Settings
    from ragloom.stores.embedding_cache import EmbeddingCache
    from ragloom.stores.weaviate import WeaviateStore

    chunks = _load_chunks(args.chunks, args.fraction)
    settings = stack.up(Settings.from_env())
    embedder = make_embedder({"backend": args.backend, "batch_size": args.embed_batch})
    embedder.encode(["warm-up"] * 8)
    rss_ready = _rss_mb()
    samples: list[float] = []
    prefix = f"{settings.collection_prefix}Bench{uuid.uuid4().hex[:8]}"
    store = WeaviateStore.connect(replace(settings, collection_prefix=prefix))
    try:
        with tempfile.TemporaryDirectory() as cache_dir:
            cache = EmbeddingCache(cache_dir)
            first = sync_vectors(store, embedder, STRATEGY, chunks, cache=cache, batch_size=args.batch_size,
                                 log=lambda _line: samples.append(_rss_mb()))
            noop = []
            for _ in range(args.noop_reps if args.fraction >= 1.0 else 0):
                report = sync_vectors(store, embedder, STRATEGY, chunks, cache=cache, batch_size=args.batch_size)
                assert report.inserted == 0 and report.deleted == 0 and report.embedded == 0, report
                noop.append(report.seconds)
    finally:
        store.drop_collections()
        store.close()
    return {"chunks": len(chunks), "documents": len({c.document_id for c in chunks}), "seconds": first.seconds,
            "embed_seconds": first.embed_seconds, "write_seconds": first.write_seconds,
            "inserted": first.inserted, "model_id": embedder.model_id,
            "noop_seconds": noop, "rss_after_load_mb": rss_ready, "rss_samples_mb": samples,
            "peak_rss_mb": _peak_rss_mb()}


def _child(phase: str, args: argparse.Namespace, **extra: object) -> dict:
    argv = [sys.executable, __file__, "--phase", phase, "--chunks", str(args.chunks), "--backend", args.backend,
            "--batch-size", str(args.batch_size), "--embed-batch", str(args.embed_batch),
            "--baseline-chunks", str(args.baseline_chunks), "--baseline-reps", str(args.baseline_reps),
            "--noop-reps", str(args.noop_reps)]
    for key, value in extra.items():
        argv += [f"--{key}", str(value)]
    out = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if out.returncode != 0:
        sys.exit(f"phase {phase} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--backend", default="onnx-int8",
                        help="ragloom backend: onnx-int8 (the default) | auto | torch | onnx | openvino")
    parser.add_argument("--batch-size", type=int, default=256, help="chunks per sync batch (embed + write)")
    parser.add_argument("--embed-batch", type=int, default=0,
                        help="texts per model call, both sides (0: ragloom's default by device; the baseline 64)")
    parser.add_argument("--baseline-chunks", type=int, default=600)
    parser.add_argument("--baseline-reps", type=int, default=3)
    parser.add_argument("--noop-reps", type=int, default=5)
    parser.add_argument("--documents", type=int, default=0, help="use only the first N abstracts (0 = all 5,183)")
    parser.add_argument("--sizes", default="0.1,0.3", help="extra corpus fractions for the RSS curve (1.0 always)")
    parser.add_argument("--phase", choices=["baseline", "embed", "ingest"], help=argparse.SUPPRESS)
    parser.add_argument("--chunks", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--fraction", type=float, default=1.0, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.phase:
        result = {"baseline": phase_baseline, "embed": phase_embed, "ingest": phase_ingest}[args.phase](args)
        print(json.dumps(result))
        return

    from ragloom.chunking import RecursiveChunker
    from ragloom.types import Document, sha256_hex

    documents = []
    with (args.data / "corpus.jsonl").open() as f:
        for line in f:
            r = json.loads(line)
            text = f"{r['title']}\n\n{r['text']}"
            documents.append(Document(document_id=r["_id"], title=r["title"], text=text, source_path="corpus.jsonl",
                                      format="jsonl", content_hash=sha256_hex(text)))
            if len(documents) == args.documents:
                break
    chunks = RecursiveChunker().chunk_many(documents)
    tokens = statistics.mean(c.token_count for c in chunks)
    print(f"SciFact: {len(documents)} abstracts -> {len(chunks)} recursive chunks, mean {tokens:.0f} tokens; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        args.chunks = Path(tmp) / "chunks.pkl"
        with args.chunks.open("wb") as f:
            pickle.dump(chunks, f)
        # The baseline runs before and after the ingestion: on a shared machine, load drifts over minutes.
        before = _child("baseline", args)
        embed_only = _child("embed", args, fraction=1.0)
        full = _child("ingest", args, fraction=1.0)
        after = _child("baseline", args)
        rates = before["rates"] + after["rates"]
        baseline = statistics.median(rates)
        print(f"baseline  sentence-transformers torch encode: {baseline:6.1f} chunks/s (median of "
              f"{[round(r, 1) for r in before['rates']]} before and {[round(r, 1) for r in after['rates']]} after "
              f"the ingestion, {args.baseline_chunks} random chunks each); peak RSS {before['peak_rss_mb']:.0f} MB",
              flush=True)
        rate = full["chunks"] / full["seconds"]
        print(f"ragloom   embed+write ({full['model_id']}): {full['chunks']} chunks in {full['seconds']:.1f}s = "
              f"{rate:6.1f} chunks/s (embed {full['embed_seconds']:.1f}s, write {full['write_seconds']:.1f}s "
              f"overlapped)", flush=True)
        embed_rate = embed_only["chunks"] / embed_only["seconds"]
        print(f"embed     the embedder alone on the same chunks and batches: {embed_rate:6.1f} chunks/s "
              f"({embed_only['seconds']:.1f}s); embed+write is {rate / embed_rate:.2f} of it", flush=True)
        print(f"ratio     {rate / baseline:.2f}x the baseline (target >= 3x); load average now "
              f"{os.getloadavg()[0]:.1f}")
        noop = statistics.median(full["noop_seconds"])
        print(f"no-op     re-ingestion of {full['chunks']} chunks: {noop * 1000:.0f} ms (median of "
              f"{len(full['noop_seconds'])}) = {full['seconds'] / noop:.0f}x faster than the first ingestion "
              f"(target >= 50x)")
        samples = full["rss_samples_mb"]
        quarter = [samples[int(q * (len(samples) - 1))] for q in (0.25, 0.5, 0.75, 1.0)] if samples else []
        print(f"memory    RSS during the full ingestion at 25/50/75/100% of batches: "
              f"{', '.join(f'{m:.0f}' for m in quarter)} MB (after model load {full['rss_after_load_mb']:.0f} MB)")
        rows = []
        for fraction in sorted({float(x) for x in args.sizes.split(",") if x} - {1.0}):
            part = _child("ingest", args, fraction=fraction)
            rows.append((part["documents"], part["chunks"], part["peak_rss_mb"], part["chunks"] / part["seconds"]))
        rows.append((full["documents"], full["chunks"], full["peak_rss_mb"], rate))
        print("peak RSS by corpus size (fresh process, collection and cache each):")
        for docs, n, peak, r in rows:
            print(f"  {docs:5d} abstracts / {n:6d} chunks: peak RSS {peak:6.0f} MB   ({r:.1f} chunks/s)")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
