"""Sync one strategy's Weaviate collection with the current chunk set: embed and write only new chunks."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ragloom import quality
from ragloom.dynamic import is_injected
from ragloom.embedding.base import Embedder, same_family
from ragloom.errors import ConfigError, StoreError
from ragloom.indexing.sync import SyncReport, current_chunks, overlap_writes, plan
from ragloom.quality import SuiteOutcome
from ragloom.stores.analysis import ANALYZER
from ragloom.stores.embedding_cache import EmbeddingCache
from ragloom.stores.weaviate import WeaviateStore, WriteResult, failure_message
from ragloom.stores.weaviate.writes import INSERT_BATCH
from ragloom.types import Chunk, Log, no_log


@dataclass
class VectorSyncReport(SyncReport):
    inserted: int = 0  # chunks written (new since the last sync)
    deleted: int = 0  # chunks removed (no longer in the current set)
    unchanged: int = 0  # already in Weaviate: not embedded, not written
    embedded: int = 0  # cache misses: texts the model ran on
    cache_hits: int = 0
    recreated: bool = False  # the collection was dropped because the model changed
    embed_seconds: float = 0.0
    write_seconds: float = 0.0  # all Weaviate write time (overlapped with embedding)
    write_processes: int = 1  # processes the batch writes ran in (1: the syncing process; writer_processes)
    collection_size: int = 0
    reindexed: int = 0  # stored chunks whose vectors were missing from the vector index, re-indexed
    rejected: int = 0  # chunks refused for their metadata (a cap of the collection): not written, the rest were
    rejected_reasons: str = ""  # document id: reason, for the first few

    derived = ("chunks_per_second",)

    @property
    def changed(self) -> bool:
        return bool(self.inserted or self.deleted or self.reindexed)

    @property
    def chunks_per_second(self) -> float:
        return self.inserted / self.seconds if self.seconds > 0 else 0.0


def sync_vectors(store: WeaviateStore, embedder: Embedder, strategy: str, chunks: list[Chunk],
                 cache: EmbeddingCache | None = None, batch_size: int = 256, log: Log = no_log,
                 writes_in_flight: int = 0) -> VectorSyncReport:
    """Make the collection of ``strategy`` hold exactly ``chunks``, each with its ``embed_text`` vector.

    Chunk ids are content-derived, so "in Weaviate already" means unchanged: only new ids are embedded
    (cache first) and written, in batches (memory stays flat; writing batch n overlaps embedding n+1),
    and ids no longer current are deleted after the inserts (an edited document is never missing).
    A collection indexed with another model is dropped and rebuilt; one indexed by another backend of the same
    model (``same_family``: e.g. torch on a GPU, onnx-int8 on the CPU) is kept, its vectors and the new ones
    side by side. Idempotent: a second call with the same chunks writes nothing. Objects that still fail after
    the store's retries are collected over all batches; then StoreError names them (the next sync retries them:
    they count as new). ``writes_in_flight``: batch writes at once (0: as the store's ``batch_writer`` says).
    """
    started = time.perf_counter()
    report = VectorSyncReport(strategy=strategy)
    current = current_chunks("sync_vectors", strategy, chunks)
    if batch_size < 1:
        raise ConfigError(f"sync_vectors: batch_size must be >= 1, got {batch_size}")

    info = store.collection_info(strategy)
    if info and info.get("model_id") and not same_family(info["model_id"], embedder.model_id):
        log(f"{strategy}: collection was indexed with {info['model_id']}; rebuilding for {embedder.model_id}")
        store.drop_collection(strategy)
        report.recreated = True
    elif info and info.get("bm25") != ANALYZER:
        # written before the stemmed BM25 property (or with another analysis): vectors come from the cache
        log(f"{strategy}: collection's BM25 text was analysed with {info.get('bm25') or 'none'}; rebuilding "
            f"for {ANALYZER}")
        store.drop_collection(strategy)
        report.recreated = True
    store.ensure_collection(strategy, embedder.dimension, model_id=embedder.model_id)
    stored = store.chunk_index(strategy)
    todo = plan(current, _ingested(stored))
    report.unchanged = todo.unchanged
    log(f"{strategy}: {len(current)} current chunks, {len(todo.new)} new, {report.unchanged} unchanged, "
        f"{len(todo.stale)} to delete")

    # Similar lengths in a batch pad less: the order of insertion does not matter to Weaviate.
    new = sorted(todo.new, key=lambda c: len(c.embed_text))
    if store.requests_per_write > 1:  # enough objects per write to fill the insert requests it may have in flight
        batch_size = max(batch_size, INSERT_BATCH * store.requests_per_write)
    failures: dict[str, str] = {}
    rejected: dict[str, str] = {}
    document_of = {c.chunk_id: c.document_id for c in new}

    def embedded() -> Iterator[tuple[list[Chunk], np.ndarray]]:
        for begin in range(0, len(new), batch_size):
            batch = new[begin:begin + batch_size]
            t0 = time.perf_counter()
            vectors = _embed(embedder, cache, batch, report)
            report.embed_seconds += time.perf_counter() - t0
            done = begin + len(batch)
            elapsed = time.perf_counter() - started
            log(f"{strategy}: embedded {done}/{len(new)} ({done / max(elapsed, 1e-9):.0f} chunks/s, "
                f"{report.cache_hits} from cache)")
            yield batch, vectors

    def written(result: WriteResult) -> None:
        report.inserted += result.written
        failures.update(result.failed)
        rejected.update(result.rejected)

    # The store says how its batch writes run (in this process, or in writer processes on many cores) and how
    # many at once
    with store.batch_writer(strategy, -(-len(new) // batch_size), writes_in_flight) as (write, depth, processes):
        report.write_processes = processes
        if processes > 1:
            log(f"{strategy}: writing from {processes} writer processes, {depth} batches at once")
        times = overlap_writes(embedded(), write, written, thread_name="weaviate-write", depth=depth)
    report.write_seconds = times.work_seconds
    if rejected:
        # one document's metadata never fails the sync of everyone else's: it is left out, with its reason
        reasons = {document_of[cid]: reason for cid, reason in rejected.items()}
        report.rejected = len(rejected)
        report.rejected_reasons = "; ".join(f"{doc}: {why}" for doc, why in list(reasons.items())[:5])
        log(f"{strategy}: {len(rejected)} chunks of {len(reasons)} documents rejected for their metadata: "
            f"{report.rejected_reasons}")

    if todo.stale:
        report.deleted = store.delete_chunks(strategy, todo.stale)
        log(f"{strategy}: deleted {report.deleted} chunks no longer current")
    # Unchanged chunks are never rewritten, so one whose vector a failed write left out of the vector index
    # (Writes.repair_vector_index) would stay invisible to dense search for good: re-index it from its stored
    # vector. After the writes, so that one this run's retries left out is healed now too.
    # What the collection holds now: what it held less what was deleted (injected items included), plus what
    # was written; listing the collection again would cost a second pass over it.
    kept = set(stored).difference(todo.stale)
    report.reindexed = store.repair_vector_index(strategy, [*kept, *current])
    if report.reindexed:
        log(f"{strategy}: re-indexed {report.reindexed} stored chunks missing from the vector index")
    report.collection_size = store.count(strategy)
    report.seconds = time.perf_counter() - started
    log(f"{strategy}: inserted {report.inserted}, deleted {report.deleted}, unchanged {report.unchanged}, "
        f"failed {len(failures)}; collection holds {report.collection_size} ({report.seconds:.1f}s)")
    if failures:
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


def _ingested(index: dict[str, str]) -> dict[str, str]:
    """The chunk index without injected items (ragloom.dynamic): they are not the corpus's to sync or delete."""
    return {cid: doc for cid, doc in index.items() if not is_injected(doc)}


def check_vectors(store: WeaviateStore, strategy: str, chunk_ids: set[str], dimension: int) -> SuiteOutcome:
    """For asset checks: the collection against the current chunk ids and the model's ``dimension``
    (the Great Expectations suite `ragloom.quality.check_vectors`)."""
    return quality.check_vectors(chunk_ids, _ingested(store.chunk_index(strategy)).keys(),
                                 store.vector_dimension(strategy), dimension)
