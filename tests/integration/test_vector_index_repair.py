"""Objects stored without their vector in Weaviate's vector index: how they arise, and that ragloom heals them.

Weaviate 1.39 marks a collection's shards read-only for a moment on every collection config update. A batch
write that meets that moment midway leaves some objects stored (findable by filters) but missing from the vector
index, and a rewrite of the same object is skipped by Weaviate as unchanged. Here a thread keeps updating the
collection's config (to the values it already has) while objects are written, as ragloom's own version stamps
once did on every write.

The race depends on the server: on the local stack holding ~150 collections (a day of evaluations and snapshots
left in it) no write was damaged in 60 s, and with 46 the damage showed in under 8 s (2026-11-28). Clear old
evaluation namespaces from a long-lived stack before running this file.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
from weaviate.classes.config import Reconfigure
from weaviate.classes.data import DataObject
from weaviate.classes.query import Filter
from weaviate.exceptions import UnexpectedStatusCodeError, WeaviateInsertManyAllFailedError
from weaviate.util import generate_uuid5

from ragloom.embedding import Embedder
from ragloom.indexing.vectors import sync_vectors
from ragloom.metadata import MetadataLayout
from ragloom.stores.weaviate import WeaviateStore
from ragloom.stores.weaviate.schema import object_properties
from ragloom.types import Chunk, Scope

STRATEGY = "recursive"
SHARED = Scope().path  # the scope every chunk here is written in
DIM = 16
DAMAGE_SECONDS = 60  # upper bound; damage typically shows within a few seconds of writes


class _TableEmbedder(Embedder):
    """Fixed vectors by text (the tests know every vector; sync_vectors embeds nothing here anyway)."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors
        self.model_id, self.dimension, self.max_tokens = "table-16", DIM, 512

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


def _chunks(start: int, n: int) -> list[Chunk]:
    return [Chunk(chunk_id=f"chunk-{i}", document_id=f"doc-{i % 7}", strategy=STRATEGY, text=f"text {i} of doc",
                  start=0, end=10, token_count=4, position=i, heading_path=["Part", f"Section {i % 3}"])
            for i in range(start, start + n)]


def _vectors(chunks: list[Chunk], seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((len(chunks), DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _unsearchable(store: WeaviateStore, chunk_ids: Iterable[str] | None = None) -> set[str]:
    """Stored chunks (of ``chunk_ids``, default all) that ragloom's dense search cannot return: a search filtered
    on the scope and on 1,000 ids at a time ranks every object the filter allows that is in the vector index
    (Weaviate searches so few objects by brute force; one search over all would pass its result limit, 10,000)."""
    stored = set(store.chunk_index(STRATEGY))  # reads the object store itself
    ids = sorted(stored if chunk_ids is None else stored & set(chunk_ids))
    collection = store.client.collections.use(store.collection_name(STRATEGY))
    found: set[str] = set()
    for begin in range(0, len(ids), 1000):
        part = ids[begin:begin + 1000]
        where = Filter.by_property("scope_path").equal(SHARED) & Filter.by_property("chunk_id").contains_any(part)
        found |= {o.properties["chunk_id"] for o in collection.query.near_vector(
            near_vector=[1.0] * DIM, limit=len(part) + 1, filters=where, return_properties=["chunk_id"]).objects}
    return set(ids) - found


@contextmanager
def _config_churn(store: WeaviateStore) -> Iterator[None]:
    """Keep updating the collection's BM25 config to the values it has (each update makes the shards read-only
    for a moment in Weaviate 1.39)."""
    config = store.client.collections.use(store.collection_name(STRATEGY)).config
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            # An update that lands in the read-only moment of the one before is refused (422: "store is read-only");
            # the churn must go on, or the writes meet no more read-only moments and the test cannot damage any.
            with contextlib.suppress(UnexpectedStatusCodeError):
                config.update(inverted_index_config=Reconfigure.inverted_index(bm25_k1=store.bm25_k1,
                                                                               bm25_b=store.bm25_b))

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)
        # Weaviate restores the shards to READY in the background after the last update
        deadline = time.monotonic() + 10
        while any(shard.status != "READY" for shard in config.get_shards()) and time.monotonic() < deadline:
            time.sleep(0.05)


def _damaged_collection(store: WeaviateStore, embedder: _TableEmbedder) -> tuple[list[Chunk], set[str]]:
    """Write chunks in plain batches under config churn (no retries) until some are stored but unindexed."""
    store.ensure_collection(STRATEGY, DIM, model_id=embedder.model_id)
    collection = store.client.collections.use(store.collection_name(STRATEGY))
    written: list[Chunk] = []
    damaged: set[str] = set()
    started = time.monotonic()
    with _config_churn(store):
        while not damaged and time.monotonic() - started < DAMAGE_SECONDS:
            chunks = _chunks(len(written), 100)
            vectors = _vectors(chunks, seed=len(written))
            embedder.vectors.update({c.embed_text: v for c, v in zip(chunks, vectors, strict=True)})
            layout = MetadataLayout()
            objects = [DataObject(properties=object_properties(c, layout), uuid=generate_uuid5(c.chunk_id),
                                  vector=v.tolist()) for c, v in zip(chunks, vectors, strict=True)]
            with contextlib.suppress(WeaviateInsertManyAllFailedError):  # objects fail; some are stored anyway
                collection.data.insert_many(objects)
            written += chunks
            damaged = _unsearchable(store, [c.chunk_id for c in chunks])  # only this batch can be damaged
    assert damaged, f"no object was left out of the vector index in {DAMAGE_SECONDS} s of writes under churn"
    stored = set(store.chunk_index(STRATEGY))
    return [c for c in written if c.chunk_id in stored], damaged


def test_sync_reindexes_stored_chunks_missing_from_the_vector_index(weaviate_store_factory):
    store = weaviate_store_factory()
    embedder = _TableEmbedder({})
    chunks, damaged = _damaged_collection(store, embedder)
    for chunk_id in damaged:  # stored (the cursor reads the object store), yet invisible to dense search
        assert chunk_id in store.chunk_index(STRATEGY)
        assert chunk_id not in {i.chunk_id for i in store.near_vector(STRATEGY, embedder.vectors[
            next(c.embed_text for c in chunks if c.chunk_id == chunk_id)], k=5)}

    report = sync_vectors(store, embedder, STRATEGY, chunks)

    assert report.reindexed == len(damaged) and report.inserted == 0 and report.deleted == 0
    assert not _unsearchable(store)
    for chunk in chunks:
        if chunk.chunk_id in damaged:  # its own vector finds it first, and the stored vector is the one written
            top = store.near_vector(STRATEGY, embedder.vectors[chunk.embed_text], k=1, include_vectors=True)[0]
            assert top.chunk_id == chunk.chunk_id
            stored = np.array(top.metadata["vector"], dtype=np.float32)
            assert np.array_equal(stored, embedder.vectors[chunk.embed_text])
    assert sync_vectors(store, embedder, STRATEGY, chunks).reindexed == 0

