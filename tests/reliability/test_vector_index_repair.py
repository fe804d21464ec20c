"""Objects stored without their vector in Weaviate's vector index, and that a sync heals them.

Weaviate 1.39 writes an object in steps: the object store, the inverted indexes, then the vector index (HNSW), whose
commit log it appends to and replays on start-up. A crash that cuts that log leaves objects stored (the cursor and
filters find them) that no vector search returns, and rewriting such an object unchanged does not help: Weaviate
skips the indexes for an object whose vector did not change. A concurrent collection config update (each one
turns the shards read-only for a moment) left the same damage behind writes that met it.

A write that failed before the inverted indexes leaves objects that filters on their ids skip as well: fetching
chunks by id (graph_rag's passages) and deleting them by id (an edited document's old chunks) then miss them.

Here the damage is made the way a crash makes it, and deterministically, with Weaviate killed: the collection's
HNSW commit log is cut to half its length (the server started again replays only the first part), or the id
index's files are removed. (This test provoked it through config updates until 2026-11-28: how often that race
damaged a write depended on how many collections the server held, so it could pass or time out on the same code.)
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from reliability_support import STRATEGY, HashEmbedder, abstracts, make_chunks

from ragloom import stack
from ragloom.indexing.vectors import sync_vectors
from ragloom.settings import Settings
from ragloom.stack import weaviate as weaviate_stack
from ragloom.stores.weaviate import WeaviateStore

N_WRITTEN = 300  # in the collection when Weaviate is killed
N_AFTER = 100  # written by the sync after the restart, beside the repair


@pytest.fixture
def repair_settings(live_stack: Settings):
    """The private stack, with a collection prefix of this test's own, dropped afterwards."""
    settings = dataclasses.replace(live_stack, collection_prefix="RepairIndex")
    with WeaviateStore.connect(settings) as store:
        store.drop_collections()
    yield settings
    with WeaviateStore.connect(stack.up(settings)) as store:
        store.drop_collections()


def unsearchable(store: WeaviateStore) -> set[str]:
    """Stored chunks that a dense search cannot return: a search filtered to the stored ids ranks every object the
    filter allows that is in the vector index (so few objects are searched by brute force)."""
    from weaviate.classes.query import Filter

    stored = sorted(store.chunk_index(STRATEGY))  # reads the object store itself, through the cursor
    collection = store.client.collections.use(store.collection_name(STRATEGY))
    probe = [1.0] * store.vector_dimension(STRATEGY)
    found = {o.properties["chunk_id"] for o in collection.query.near_vector(
        near_vector=probe, limit=len(stored) + 1, filters=Filter.by_property("chunk_id").contains_any(stored),
        return_properties=["chunk_id"]).objects}
    return set(stored) - found


def shards(settings: Settings, collection: str) -> list[Path]:
    return [d for d in (settings.stack_dir / "weaviate" / "data" / collection.lower()).iterdir() if d.is_dir()]


def cut_vector_index_log(shard: Path) -> None:
    """Each commit log of the shard's vector index cut to half its length: the tail a crash loses."""
    logs = [f for d in shard.glob("*.hnsw.commitlog.d") for f in d.iterdir() if f.is_file()]
    assert logs, f"no vector index commit log under {shard}"
    for f in logs:
        os.truncate(f, f.stat().st_size // 2)


def drop_id_index(shard: Path) -> None:
    """The shard's inverted index of object ids removed (segments and write-ahead log)."""
    shutil.rmtree(shard / "lsm" / "property__id")


@pytest.mark.parametrize("cut", [cut_vector_index_log, drop_id_index], ids=["vector-index-log", "id-index"])
def test_a_sync_reindexes_the_chunks_a_crash_cut_from_an_index(repair_settings, report, cut):
    settings = repair_settings
    embedder = HashEmbedder()
    docs = abstracts(N_WRITTEN + N_AFTER)
    written, later = make_chunks(docs[:N_WRITTEN]), make_chunks(docs[N_WRITTEN:])
    ids = [c.chunk_id for c in written]
    with WeaviateStore.connect(settings) as store:
        assert sync_vectors(store, embedder, STRATEGY, written).inserted == N_WRITTEN
        assert not unsearchable(store) and len(store.fetch(STRATEGY, ids)) == N_WRITTEN
        collection = store.collection_name(STRATEGY)

    weaviate_stack.process(settings).kill()
    for shard in shards(settings, collection):
        cut(shard)
    settings = stack.up(settings)

    with WeaviateStore.connect(settings) as store:
        assert set(store.chunk_index(STRATEGY)) == set(ids)  # every object is still stored
        if cut is cut_vector_index_log:
            damaged = unsearchable(store)
            assert 0 < len(damaged) < N_WRITTEN, "cutting half the log should lose some vectors and keep others"
            text = {c.chunk_id: c.embed_text for c in written}
            for chunk_id in sorted(damaged)[:5]:  # its own vector does not find it
                own = embedder.encode([text[chunk_id]])[0]
                assert chunk_id not in {i.chunk_id for i in store.near_vector(STRATEGY, own, k=5)}
        else:
            damaged = set(ids) - {i.chunk_id for i in store.fetch(STRATEGY, ids)}
            assert damaged == set(ids), "without the id index no chunk is fetched by id"

        sync = sync_vectors(store, embedder, STRATEGY, [*written, *later])

        assert (sync.reindexed, sync.inserted, sync.deleted) == (len(damaged), N_AFTER, 0)
        assert not unsearchable(store)
        assert len(store.fetch(STRATEGY, [*ids, *(c.chunk_id for c in later)])) == N_WRITTEN + N_AFTER
        for chunk in [c for c in written if c.chunk_id in damaged]:
            own = embedder.encode([chunk.embed_text])[0]
            top = store.near_vector(STRATEGY, own, k=1, include_vectors=True)[0]
            assert top.chunk_id == chunk.chunk_id  # found by its own vector, the one written (not the doubled one)
            assert np.array_equal(np.array(top.metadata["vector"], dtype=np.float32), own)
        again = sync_vectors(store, embedder, STRATEGY, [*written, *later])
        assert (again.reindexed, again.inserted, again.deleted) == (0, 0, 0)
    report(fault=f"Weaviate SIGKILLed, {cut.__name__} on each shard, restarted", faults_injected=1,
           survived=True, stored=N_WRITTEN, damaged=len(damaged), reindexed=sync.reindexed)
