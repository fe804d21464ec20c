"""Work that fans out to processes, run inside a Celery prefork worker (a billiard pool's worker, as the cluster
profile runs Dagster steps): multiprocessing refuses children in such a daemonic process, so graph extraction and
the vector sync's writes run in the worker itself, and finish, where they would otherwise start a pool."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import billiard
import pytest

from ragloom.chunking import RecursiveChunker
from ragloom.settings import Settings
from ragloom.types import Chunk, Document, sha256_hex

MUSIQUE = Path(__file__).resolve().parents[3] / "shared" / "data" / "musique" / "corpus.jsonl"


def _chunks(documents: int = 40) -> list[Chunk]:
    docs = []
    with MUSIQUE.open(encoding="utf-8") as handle:
        for _, line in zip(range(documents), handle, strict=False):
            row = json.loads(line)
            docs.append(Document(document_id=row["_id"], title="", text=row["text"], source_path="musique.jsonl",
                                 format="txt", content_hash=sha256_hex(row["text"])))
    return RecursiveChunker().chunk_many(docs)


def _extract_in_worker(_: object) -> tuple[bool, int, int, int]:
    from ragloom.extraction.extractor import extractor_for
    from ragloom.settings import may_start_processes

    chunks = _chunks()
    # two processes for any extraction past 16 chunks, where this process may start them
    extractor = extractor_for(Settings.from_env(), n_process=2, parallel_min_chunks=16, batch_size=8)
    extraction = extractor.extract(chunks)
    return may_start_processes(), extractor.processes_for(len(chunks)), len(chunks), len(extraction.entities)


def _sync_in_worker(settings: Settings) -> tuple[int, int, int, int]:
    from ragloom.embedding import make_embedder
    from ragloom.indexing.vectors import sync_vectors
    from ragloom.stores.weaviate import WeaviateStore

    chunks = _chunks()
    store = WeaviateStore.connect(settings)
    try:
        report = sync_vectors(store, make_embedder({"backend": "onnx-int8"}), "recursive", chunks, batch_size=8)
        return report.write_processes, report.inserted, store.count("recursive"), len(chunks)
    finally:
        store.drop_collections()
        store.close()


@pytest.fixture(scope="module")
def celery_like_worker():
    """A billiard pool worker: daemonic, as Celery's prefork workers are. Spawned, not forked: a child forked from
    this test process would inherit its open gRPC channels, which gRPC does not support (a worker forked here once
    failed its first Weaviate connection with "sendmsg: Bad file descriptor"); Celery forks its workers from a
    main process that has opened none."""
    with billiard.get_context("spawn").Pool(1) as pool:
        yield pool


def test_graph_extraction_in_a_celery_worker_runs_in_the_worker(celery_like_worker):
    (may_fork, processes, chunks, entities), = celery_like_worker.map(_extract_in_worker, [None])
    assert not may_fork and processes == 1 and chunks > 16 and entities > 20


def test_a_vector_sync_in_a_celery_worker_writes_in_the_worker(settings, celery_like_worker):
    worker_settings = replace(settings, collection_prefix=f"Test{uuid.uuid4().hex[:10]}", weaviate_write_processes=2,
                              weaviate_write_requests=1)
    (processes, inserted, stored, chunks), = celery_like_worker.map(_sync_in_worker, [worker_settings])
    assert processes == 1 and inserted == stored == chunks > 8
