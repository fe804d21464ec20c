"""Batch writes from worker processes, for a sync whose embedding outruns one process's writes.

Building a batch's objects is Python work in the client: the properties, the stemmed BM25 text and
weaviate-client's protobuf messages (~285 µs of CPU per object; docs/experiments/2026-11-26-gpu-ingest.md). On a
GPU the process that feeds the model also builds every object, under one interpreter lock, and the write ran at
half of what Weaviate alone accepts. Here each batch goes to one of a few processes, each with its own client:
the syncing process only embeds and hands over chunks and vectors (pickled, a few µs per chunk).

Workers are started with ``spawn``: the syncing process may hold a CUDA context and gRPC channels, which a
forked child must not inherit. A batch's result (written, failed, rejected) comes back as the in-process write
returns it, so the sync's accounting, its failure report and its idempotent re-run are the same. A worker that
dies (killed, out of memory) fails the sync loudly with a StoreError; the re-run writes what is missing.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ragloom.errors import StoreError
from ragloom.metadata import MetadataLayout
from ragloom.settings import Settings
from ragloom.types import Chunk

if TYPE_CHECKING:
    from ragloom.stores.weaviate.writes import WriteResult


def default_write_processes(cpus: int | None) -> int:
    """Writer processes when the settings say 0: none beside the syncing process on up to 8 cores, where the
    embedder is the slower side by far (a 2-core CPU embeds ~150 chunks/s and writes ~1,400), else one per 4
    cores, at most 4 (docs/experiments/2026-11-27-gpu-writer-processes.md)."""
    cpus = cpus or 1
    return 1 if cpus <= 8 else min(4, cpus // 4)


_worker_store: Any = None  # each worker process's own store (a WeaviateStore)
_connect_error = ""  # why it has none: said by every write it is given


def _connect(settings: Settings, store_class: Any, metadata: MetadataLayout) -> None:
    global _worker_store, _connect_error
    try:
        # a worker writes in its own process (no pool of its own) with the insert requests the settings give
        _worker_store = store_class.connect(replace(settings, weaviate_write_processes=1))
        _worker_store.metadata = metadata
    except Exception as e:  # an initializer that raises only breaks the pool: keep the reason for the write
        _connect_error = f"{type(e).__name__}: {e}"


def _started() -> None:
    """A task that only makes the pool start a worker."""


def _write(strategy: str, chunks: list[Chunk], vectors: np.ndarray) -> WriteResult:
    if _worker_store is None:
        raise StoreError(f"a Weaviate writer process could not connect: {_connect_error}")
    return _worker_store.write_chunks(strategy, chunks, vectors)


class WriterPool:
    """``processes`` worker processes, each with a store ``store_class.connect(settings)`` (the class is pickled by
    name: each worker imports it) typing metadata as ``metadata`` does; ``write`` sends one batch to whichever is
    free and returns its ``WriteResult``. ``close`` stops the workers."""

    def __init__(self, settings: Settings, processes: int, store_class: Any, metadata: MetadataLayout) -> None:
        if processes < 2:
            raise StoreError(f"a writer pool needs at least 2 processes, got {processes}")
        self._pool = ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_connect, initargs=(settings, store_class, metadata))
        # a spawned pool starts a worker per task submitted: start them all now, so that they import and connect
        # while the first batches are embedded instead of after (0.66 s for 2 workers on 2 cores)
        for _ in range(processes):
            self._pool.submit(_started)

    def write(self, strategy: str, chunks: list[Chunk], vectors: np.ndarray) -> WriteResult:
        try:
            return self._pool.submit(_write, strategy, chunks, vectors).result()
        except BrokenProcessPool as e:
            raise StoreError(f"a Weaviate writer process died while writing {len(chunks)} chunks of {strategy}: "
                             "killed, out of memory, or the program's main script does its work on import (writer "
                             "processes are spawned and import it: put that work under "
                             "`if __name__ == \"__main__\":`, or set RAGLOOM_WEAVIATE_WRITE_PROCESSES=1). The "
                             "batches before it are written; a re-run of the sync writes the rest") from e

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
