"""Sync one strategy's Weaviate collection with the current chunk set: embed and write only new chunks."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragloom.embedding.base import Embedder
from ragloom.errors import ConfigError, StoreError
from ragloom.stores.embedding_cache import EmbeddingCache
from ragloom.stores.weaviate import WeaviateStore, WriteResult, failure_message
from ragloom.types import Chunk

Log = Callable[[str], None]


def _no_log(message: str) -> None:
    pass


@dataclass
class VectorSyncReport:
    strategy: str
    inserted: int = 0  # chunks written (new since the last sync)
    deleted: int = 0  # chunks removed (no longer in the current set)
    unchanged: int = 0  # already in Weaviate: not embedded, not written
    embedded: int = 0  # cache misses: texts the model ran on
    cache_hits: int = 0
    failed: int = 0
    failed_ids: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # first few chunk id -> error
    recreated: bool = False  # the collection was dropped because the model changed
    embed_seconds: float = 0.0
    write_seconds: float = 0.0
    seconds: float = 0.0
    chunks_per_second: float = 0.0  # inserted / seconds
    collection_size: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.inserted or self.deleted)

    def as_metadata(self) -> dict[str, Any]:
        """Flat numbers and short strings for asset metadata."""
        return {k: v for k, v in self.__dict__.items() if k not in ("failed_ids", "errors")} | {
            "failed_ids_sample": self.failed_ids[:10]}


def sync_vectors(store: WeaviateStore, embedder: Embedder, strategy: str, chunks: list[Chunk],
                 cache: EmbeddingCache | None = None, batch_size: int = 256, log: Log = _no_log,
                 raise_on_failure: bool = True) -> VectorSyncReport:
    """Make the collection of ``strategy`` hold exactly ``chunks``, each with its ``embed_text`` vector.

    Chunk ids are content-derived, so "in Weaviate already" means unchanged: only new ids are embedded
    (cache first) and written, in batches (memory stays flat; writing batch n overlaps embedding n+1),
    and ids no longer current are deleted after the inserts (an edited document is never missing).
    A collection indexed with another model id is dropped and rebuilt. Idempotent: a second call with
    the same chunks writes nothing. Objects that still fail after the store's retries are collected
    over all batches; then StoreError names them (or, with ``raise_on_failure=False``, the report does).
    """
    started = time.perf_counter()
    report = VectorSyncReport(strategy=strategy)
    other = sorted({c.strategy for c in chunks if c.strategy != strategy})
    if other:
        raise ConfigError(f"sync_vectors(strategy={strategy!r}) was given chunks of strategy {other}")
    if batch_size < 1:
        raise ConfigError(f"sync_vectors: batch_size must be >= 1, got {batch_size}")
    current = {c.chunk_id: c for c in chunks}

    info = store.collection_info(strategy)
    if info and info.get("model_id") and info["model_id"] != embedder.model_id:
        log(f"{strategy}: collection was indexed with {info['model_id']}; rebuilding for {embedder.model_id}")
        store.drop_collection(strategy)
        report.recreated = True
    store.ensure_collection(strategy, embedder.dimension, model_id=embedder.model_id)
    stored = store.chunk_index(strategy)
    new = [c for cid, c in current.items() if cid not in stored]
    stale = [cid for cid in stored if cid not in current]
    report.unchanged = len(current) - len(new)
    log(f"{strategy}: {len(current)} current chunks, {len(new)} new, {report.unchanged} unchanged, "
        f"{len(stale)} to delete")

    # Similar lengths in a batch pad less: the order of insertion does not matter to Weaviate.
    new.sort(key=lambda c: len(c.embed_text))
    failures: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="weaviate-write") as writer:
        pending: Future[tuple[WriteResult, float]] | None = None
        for begin in range(0, len(new), batch_size):
            batch = new[begin:begin + batch_size]
            t0 = time.perf_counter()
            vectors = _embed(embedder, cache, batch, report)
            report.embed_seconds += time.perf_counter() - t0
            if pending is not None:
                _collect(pending, report, failures)
            pending = writer.submit(_timed_write, store, strategy, batch, vectors)
            done = begin + len(batch)
            elapsed = time.perf_counter() - started
            log(f"{strategy}: embedded {done}/{len(new)} ({done / max(elapsed, 1e-9):.0f} chunks/s, "
                f"{report.cache_hits} from cache)")
        if pending is not None:
            _collect(pending, report, failures)

    if stale:
        report.deleted = store.delete_chunks(strategy, stale)
        log(f"{strategy}: deleted {report.deleted} chunks no longer current")
    report.failed = len(failures)
    report.failed_ids = list(failures)
    report.errors = dict(list(failures.items())[:10])
    report.collection_size = store.count(strategy)
    report.seconds = time.perf_counter() - started
    report.chunks_per_second = report.inserted / report.seconds if report.seconds > 0 else 0.0
    log(f"{strategy}: inserted {report.inserted}, deleted {report.deleted}, unchanged {report.unchanged}, "
        f"failed {report.failed}; collection holds {report.collection_size} ({report.seconds:.1f}s)")
    if failures and raise_on_failure:
        raise StoreError(failure_message(store.collection_name(strategy), failures))
    return report


def encode_cached(embedder: Embedder, cache: EmbeddingCache, texts: list[str]) -> tuple[np.ndarray, int]:
    """Vectors for ``texts``, embedding only the cache misses (and caching them); returns (vectors, hits)."""
    hits, misses = cache.get_many(embedder.model_id, texts)
    vectors = np.empty((len(texts), embedder.dimension), dtype=np.float32)
    for i, vector in hits.items():
        vectors[i] = vector
    if misses:
        fresh = embedder.encode([texts[i] for i in misses])
        vectors[misses] = fresh
        cache.put_many(embedder.model_id, [texts[i] for i in misses], fresh)
    return vectors, len(hits)


def _embed(embedder: Embedder, cache: EmbeddingCache | None, batch: list[Chunk],
           report: VectorSyncReport) -> np.ndarray:
    texts = [c.embed_text for c in batch]
    if cache is None:
        report.embedded += len(texts)
        return embedder.encode(texts)
    vectors, hits = encode_cached(embedder, cache, texts)
    report.cache_hits += hits
    report.embedded += len(texts) - hits
    return vectors


def _timed_write(store: WeaviateStore, strategy: str, batch: list[Chunk],
                 vectors: np.ndarray) -> tuple[WriteResult, float]:
    t0 = time.perf_counter()
    result = store.write_chunks(strategy, batch, vectors)
    return result, time.perf_counter() - t0


def _collect(pending: Future[tuple[WriteResult, float]], report: VectorSyncReport, failures: dict[str, str]) -> None:
    result, seconds = pending.result()  # re-raises a StoreError from the writer thread here
    report.inserted += result.written
    report.write_seconds += seconds
    failures.update(result.failed)


def check_vectors(store: WeaviateStore, strategy: str, chunk_ids: set[str], dimension: int) -> dict[str, Any]:
    """For asset checks: every current chunk id is in Weaviate and nothing else is; vectors have ``dimension``."""
    stored = store.chunk_index(strategy)
    missing = sorted(chunk_ids - stored.keys())
    extra = sorted(stored.keys() - chunk_ids)
    actual = store.vector_dimension(strategy)
    dimension_ok = actual == dimension or (actual is None and not chunk_ids)
    return {
        "ok": not missing and not extra and dimension_ok,
        "expected": len(chunk_ids),
        "stored": len(stored),
        "missing": len(missing),
        "extra": len(extra),
        "missing_sample": missing[:10],
        "extra_sample": extra[:10],
        "dimension": actual,
        "expected_dimension": dimension,
        "dimension_ok": dimension_ok,
    }
