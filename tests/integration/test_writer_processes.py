"""A vector sync whose batch writes run in writer processes, against the real local Weaviate: the collection it
leaves is the one a sync in one process leaves, object for object; a writer process killed mid-sync fails the sync
loudly and the re-run completes it exactly."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ragloom.chunking import RecursiveChunker
from ragloom.embedding import make_embedder
from ragloom.errors import StoreError
from ragloom.indexing.vectors import sync_vectors
from ragloom.metadata import MetadataLayout
from ragloom.settings import Settings
from ragloom.stores.weaviate import WeaviateStore
from ragloom.types import Chunk, Document, sha256_hex

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "data" / "scifact"
STRATEGY = "recursive"


@pytest.fixture(scope="module")
def embedder():
    return make_embedder({"backend": "onnx"})


@pytest.fixture(scope="module")
def chunks() -> list[Chunk]:
    """80 chunks of SciFact abstracts, with metadata the writers must add as properties as they meet it."""
    documents = []
    with (SCIFACT / "corpus.jsonl").open() as f:
        for i, line in enumerate(f):
            record = json.loads(line)
            text = f"{record['title']}\n\n{record['text']}"
            documents.append(Document(document_id=record["_id"], title=record["title"], text=text,
                                      source_path="scifact/corpus.jsonl", format="jsonl",
                                      content_hash=sha256_hex(text),
                                      metadata={"status": "draft" if i % 2 else "published", f"k{i % 7}": i}))
            if len(documents) == 40:
                break
    chunks = RecursiveChunker().chunk_many(documents)[:80]
    assert len(chunks) > 48
    return chunks


@pytest.fixture
def connect(settings: Settings) -> Iterator:
    """``connect(processes)`` -> a store of its own prefix connected as ``WeaviateStore.connect`` does, its
    collections dropped at the end."""
    made: list[WeaviateStore] = []

    def make(processes: int) -> WeaviateStore:
        store = WeaviateStore.connect(replace(settings, collection_prefix=f"Test{uuid.uuid4().hex[:10]}",
                                              weaviate_write_processes=processes, weaviate_write_requests=1))
        made.append(store)
        return store

    yield make
    for store in made:
        store.drop_collections()
        store.close()


def _objects(store: WeaviateStore) -> dict[str, tuple[dict, np.ndarray]]:
    collection = store.client.collections.use(store.collection_name(STRATEGY))
    return {str(o.uuid): (o.properties, np.asarray(o.vector["default"], dtype=np.float32))
            for o in collection.iterator(include_vector=True)}


def test_a_sync_in_writer_processes_leaves_the_collection_one_process_leaves(connect, chunks, embedder):
    alone, pooled = connect(1), connect(2)
    for store in (alone, pooled):  # a layout set on the store, not in the settings: the writers must use it too
        store.metadata = MetadataLayout(declared={"k0": "INT", "k1": "NUMBER"})
    before = set(multiprocessing.active_children())
    writers_seen: list[int] = []

    messages: list[str] = []

    def log(message: str) -> None:
        messages.append(message)
        writers_seen.append(len(set(multiprocessing.active_children()) - before))

    one = sync_vectors(alone, embedder, STRATEGY, chunks, batch_size=16)
    report = sync_vectors(pooled, embedder, STRATEGY, chunks, batch_size=16, log=log)
    assert max(writers_seen) == 2  # the batches went to two worker processes
    assert f"{STRATEGY}: writing from 2 writer processes, 2 batches at once" in messages
    assert not set(multiprocessing.active_children()) - before  # and they are gone once the sync returns
    assert report.inserted == one.inserted == len(chunks) and report.collection_size == len(chunks)

    types = {p.name: p.data_type.value for p in
             pooled.client.collections.use(pooled.collection_name(STRATEGY)).config.get().properties}
    assert types["meta_k0"] == "int" and types["meta_k1"] == "number" and types["meta_k2"] == "text[]"
    expected, written = _objects(alone), _objects(pooled)
    assert written.keys() == expected.keys()
    for object_id, (properties, vector) in expected.items():
        assert written[object_id][0] == properties
        np.testing.assert_array_equal(written[object_id][1], vector)
    again = sync_vectors(pooled, embedder, STRATEGY, chunks, batch_size=16)
    assert again.inserted == 0 and again.unchanged == len(chunks)


def test_a_writer_process_killed_mid_sync_fails_it_loudly_and_the_rerun_completes_it(connect, chunks,
                                                                                      embedder):
    store = connect(2)
    before = set(multiprocessing.active_children())
    killed: list[int] = []

    def log(message: str) -> None:
        writers = sorted(p.pid for p in set(multiprocessing.active_children()) - before)
        if not killed and writers and "embedded 48/" in message:
            os.kill(writers[0], signal.SIGKILL)
            killed.append(writers[0])

    with pytest.raises(StoreError, match="writer process died"):
        sync_vectors(store, embedder, STRATEGY, chunks, batch_size=16, log=log)
    assert killed
    survived = store.chunk_index(STRATEGY)
    assert len(survived) < len(chunks)

    rerun = sync_vectors(store, embedder, STRATEGY, chunks, batch_size=16)
    # what survived is kept and only the rest written (a batch the dead worker had sent may land meanwhile)
    assert rerun.inserted + rerun.unchanged == len(chunks) and rerun.unchanged >= len(survived)
    assert set(store.chunk_index(STRATEGY)) == {c.chunk_id for c in chunks}
    assert store.count(STRATEGY) == len(chunks)


def test_the_defaults_count_the_cores_this_process_may_use(settings, monkeypatch):
    """Insert requests and writer processes by the CPUs of this process's affinity (as extraction counts them),
    not every CPU of the machine: a container pinned to 2 of 64 cores writes as a 2-core machine does."""
    from ragloom.stores.weaviate import store as store_module

    monkeypatch.setattr(store_module, "usable_cpus", lambda: 16)
    store = WeaviateStore.connect(replace(settings, weaviate_write_processes=0, weaviate_write_requests=0))
    try:
        assert (store.write_requests, store.write_processes, store.requests_per_write) == (8, 4, 2)
    finally:
        store.close()
