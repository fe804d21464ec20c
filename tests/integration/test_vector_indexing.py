"""sync_vectors against the real Weaviate: ingest, no-op re-ingest, edit, delete, cache, model change, failures."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from weaviate.classes.query import MetadataQuery

from ragloom.chunking import RecursiveChunker
from ragloom.embedding import Embedder, make_embedder
from ragloom.errors import ConfigError, StoreError
from ragloom.indexing.vectors import check_vectors, sync_vectors
from ragloom.stores.embedding_cache import EmbeddingCache
from ragloom.stores.weaviate import WeaviateStore
from ragloom.types import Chunk, Document, sha256_hex

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "data" / "scifact" / "corpus.jsonl"
STRATEGY = "recursive"


@pytest.fixture(scope="module")
def documents() -> list[Document]:
    if not SCIFACT.exists():
        pytest.fail(f"evaluation data missing: {SCIFACT}")
    docs = []
    with SCIFACT.open() as f:
        for line in f:
            r = json.loads(line)
            text = f"{r['title']}\n\n{r['text']}"
            docs.append(Document(document_id=r["_id"], title=r["title"], text=text, source_path="corpus.jsonl",
                                 format="jsonl", content_hash=sha256_hex(text), metadata={"year": 2020}))
            if len(docs) == 12:
                return docs
    return docs


@pytest.fixture(scope="module")
def chunker() -> RecursiveChunker:
    return RecursiveChunker()


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return make_embedder({"backend": "onnx"})


@pytest.fixture
def store(weaviate_store_factory) -> WeaviateStore:
    return weaviate_store_factory()


def _update_times(store: WeaviateStore) -> dict[str, int]:
    """chunk_id -> last update time of its object: proof of which objects a sync wrote."""
    collection = store.client.collections.use(store.collection_name(STRATEGY))
    return {o.properties["chunk_id"]: o.metadata.last_update_time
            for o in collection.iterator(return_properties=["chunk_id"],
                                         return_metadata=MetadataQuery(last_update_time=True))}


def test_ingest_reingest_edit_delete(store, documents, chunker, embedder, tmp_path):
    cache = EmbeddingCache(tmp_path / "cache")
    logs: list[str] = []
    chunks = chunker.chunk_many(documents)
    assert len(chunks) > len(documents)  # abstracts are longer than a chunk: several chunks per document

    # 1. ingest, in small batches so several writes overlap with embedding
    first = sync_vectors(store, embedder, STRATEGY, chunks, cache=cache, batch_size=7, log=logs.append)
    assert (first.inserted, first.deleted, first.unchanged) == (len(chunks), 0, 0)
    assert first.embedded == len(chunks) and first.cache_hits == 0
    assert first.collection_size == len(chunks)
    assert store.chunk_index(STRATEGY) == {c.chunk_id: c.document_id for c in chunks}
    assert check_vectors(store, STRATEGY, {c.chunk_id for c in chunks}, embedder.dimension).success
    assert sum("embedded" in line for line in logs) == -(-len(chunks) // 7)
    before = _update_times(store)

    # 2. re-ingest the same chunks: nothing embedded, nothing written
    again = sync_vectors(store, embedder, STRATEGY, chunker.chunk_many(documents), cache=cache)
    assert (again.inserted, again.deleted, again.unchanged, again.embedded) == (0, 0, len(chunks), 0)
    assert _update_times(store) == before

    # 3. edit one document: only its chunks change
    edited = replace(documents[4], text=documents[4].text + "\n\nAn added closing sentence about the cohort.")
    docs2 = [*documents[:4], edited, *documents[5:]]
    chunks2 = chunker.chunk_many(docs2)
    old_ids = {c.chunk_id for c in chunks if c.document_id == edited.document_id}
    new_ids = {c.chunk_id for c in chunks2 if c.document_id == edited.document_id}
    assert new_ids - old_ids  # the edit produced at least one new chunk id
    report = sync_vectors(store, embedder, STRATEGY, chunks2, cache=cache)
    assert report.inserted == len(new_ids - old_ids)
    assert report.deleted == len(old_ids - new_ids)
    assert report.embedded == len(new_ids - old_ids)  # unchanged texts never reach the model
    assert store.chunk_index(STRATEGY) == {c.chunk_id: c.document_id for c in chunks2}
    after = _update_times(store)
    untouched = {cid for cid in before if cid not in old_ids}
    assert {cid: after[cid] for cid in untouched} == {cid: before[cid] for cid in untouched}

    # 4. delete one document: its chunks disappear, nothing else moves
    gone = docs2[7].document_id
    chunks3 = [c for c in chunks2 if c.document_id != gone]
    report = sync_vectors(store, embedder, STRATEGY, chunks3, cache=cache)
    assert report.inserted == 0 and report.deleted == len(chunks2) - len(chunks3)
    index = store.chunk_index(STRATEGY)
    assert gone not in set(index.values())
    assert index == {c.chunk_id: c.document_id for c in chunks3}
    assert report.collection_size == len(chunks3)


def test_two_batch_writes_at_once_store_every_chunk_once(store, documents, chunker, embedder):
    # every batch brings the same new metadata property (meta_year): the first two writes add it at once
    chunks = chunker.chunk_many(documents)
    report = sync_vectors(store, embedder, STRATEGY, chunks, batch_size=4, writes_in_flight=2)
    assert (report.inserted, report.collection_size) == (len(chunks), len(chunks))
    assert store.chunk_index(STRATEGY) == {c.chunk_id: c.document_id for c in chunks}
    assert check_vectors(store, STRATEGY, {c.chunk_id for c in chunks}, embedder.dimension).success
    assert store.property_types(STRATEGY)["meta_year"] == "TEXT_ARRAY"  # undeclared: the layout's type
    again = sync_vectors(store, embedder, STRATEGY, chunks, batch_size=4, writes_in_flight=2)
    assert (again.inserted, again.unchanged) == (0, len(chunks))


def test_cache_spares_the_model_after_a_rebuild(store, documents, chunker, embedder, tmp_path):
    chunks = chunker.chunk_many(documents[:4])
    cache = EmbeddingCache(tmp_path / "cache")
    sync_vectors(store, embedder, STRATEGY, chunks, cache=cache)
    store.drop_collection(STRATEGY)
    rebuilt = sync_vectors(store, embedder, STRATEGY, chunks, cache=EmbeddingCache(tmp_path / "cache"))
    assert rebuilt.inserted == len(chunks)
    assert (rebuilt.embedded, rebuilt.cache_hits) == (0, len(chunks))
    # vectors from the cache are the model's vectors: the chunk is its own nearest neighbour
    probe = embedder.encode([chunks[2].embed_text])[0]
    assert store.near_vector(STRATEGY, probe, 1)[0].chunk_id == chunks[2].chunk_id


def test_another_backend_of_the_model_keeps_the_collection_and_another_model_rebuilds_it(
        store, documents, chunker, embedder, tmp_path):
    from tiny_models import build_encoder

    from ragloom.embedding.onnx import OnnxEmbedder

    chunks = chunker.chunk_many(documents[:3])
    sync_vectors(store, embedder, STRATEGY, chunks)  # onnx fp32
    int8 = make_embedder({"backend": "onnx-int8"})
    kept = sync_vectors(store, int8, STRATEGY, chunks)
    assert not kept.recreated and kept.inserted == kept.embedded == 0
    assert store.collection_info(STRATEGY)["model_id"] == embedder.model_id
    more = chunker.chunk_many(documents[3:5])
    added = sync_vectors(store, int8, STRATEGY, chunks + more)
    assert not added.recreated and added.inserted == len(more)
    # int8 query vectors find the fp32 vectors, and fp32 query vectors the int8 ones
    assert store.near_vector(STRATEGY, int8.encode([chunks[2].embed_text])[0], 1)[0].chunk_id == chunks[2].chunk_id
    assert store.near_vector(STRATEGY, embedder.encode([more[1].embed_text])[0], 1)[0].chunk_id == more[1].chunk_id
    # openvino (bf16 on a CPU with AMX, fp32 elsewhere) joins the collection too, and each finds the other's vectors
    openvino = make_embedder({"backend": "openvino"})
    last = chunker.chunk_many(documents[5:7])
    joined = sync_vectors(store, openvino, STRATEGY, chunks + more + last)
    assert not joined.recreated and joined.inserted == joined.embedded == len(last)
    assert store.near_vector(STRATEGY, openvino.encode([more[1].embed_text])[0], 1)[0].chunk_id == more[1].chunk_id
    assert store.near_vector(STRATEGY, int8.encode([last[-1].embed_text])[0], 1)[0].chunk_id == last[-1].chunk_id

    other = OnnxEmbedder(str(build_encoder(tmp_path / "tiny")), cache_dir=tmp_path / "cache")  # another model
    report = sync_vectors(store, other, STRATEGY, chunks)
    assert report.recreated and report.inserted == len(chunks) and report.deleted == 0
    assert store.collection_info(STRATEGY)["model_id"] == other.model_id
    assert sync_vectors(store, other, STRATEGY, chunks).inserted == 0


class _BrokenForOneText(Embedder):
    """The real embedder, except one text gets a NaN vector (a model fault we must not store)."""

    def __init__(self, inner: Embedder, poisoned: str) -> None:
        self.inner, self.poisoned = inner, poisoned
        self.model_id, self.dimension, self.max_tokens = inner.model_id, inner.dimension, inner.max_tokens

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.inner.encode(texts)
        for i, text in enumerate(texts):
            if text == self.poisoned:
                vectors[i] = np.nan
        return vectors


def test_failed_objects_are_named_and_the_rest_written(store, documents, chunker, embedder):
    chunks = chunker.chunk_many(documents[:3])
    bad = chunks[1]
    broken = _BrokenForOneText(embedder, bad.embed_text)
    with pytest.raises(StoreError, match=bad.chunk_id):
        sync_vectors(store, broken, STRATEGY, chunks, batch_size=2)
    assert set(store.chunk_index(STRATEGY)) == {c.chunk_id for c in chunks} - {bad.chunk_id}
    with pytest.raises(StoreError, match=rf"^1 object\(s\) .*: {bad.chunk_id}: .*NaN"):  # the rerun retries it
        sync_vectors(store, broken, STRATEGY, chunks)
    check = check_vectors(store, STRATEGY, {c.chunk_id for c in chunks}, embedder.dimension)
    assert {o.name: o.examples for o in check.failed()} == {"every current chunk is stored": [bad.chunk_id]}
    healed = sync_vectors(store, embedder, STRATEGY, chunks)  # the next run with a sound model fills the gap
    assert healed.inserted == 1 and healed.unchanged == len(chunks) - 1


def test_check_vectors_sees_extra_chunks_and_wrong_dimension(store, documents, chunker, embedder):
    chunks = chunker.chunk_many(documents[:2])
    sync_vectors(store, embedder, STRATEGY, chunks)
    check = check_vectors(store, STRATEGY, {c.chunk_id for c in chunks[1:]}, 768)
    assert {o.name: o.examples for o in check.failed()} == {"nothing else is stored": [chunks[0].chunk_id],
                                                            "vector dimension is the model's": [384]}


def test_chunks_of_another_strategy_are_refused(store, documents, chunker, embedder):
    chunks = chunker.chunk_many(documents[:1])
    with pytest.raises(ConfigError, match="headered"):
        sync_vectors(store, embedder, "headered", chunks)


def test_empty_chunk_set_empties_the_collection(store, documents, chunker, embedder):
    chunks: list[Chunk] = chunker.chunk_many(documents[:2])
    sync_vectors(store, embedder, STRATEGY, chunks)
    report = sync_vectors(store, embedder, STRATEGY, [])
    assert report.deleted == len(chunks) and report.collection_size == 0


def test_the_query_side_follows_the_model_the_collection_was_built_with(store, documents, chunker, embedder,
                                                                         settings, tmp_path):
    from tiny_models import build_encoder

    from ragloom.api import Ragloom
    from ragloom.embedding.onnx import OnnxEmbedder

    chunks = chunker.chunk_many(documents[:2])
    sync_vectors(store, embedder, STRATEGY, chunks)  # all-MiniLM-L6-v2 (onnx fp32): the configured int8 serves it
    assert Ragloom(settings, vectors=store).context.embedder.model_id.split("|")[:2] == ["all-MiniLM-L6-v2",
                                                                                          "onnx-int8"]
    tiny = OnnxEmbedder(str(build_encoder(tmp_path / "tiny")), cache_dir=settings.cache_dir)
    sync_vectors(store, tiny, STRATEGY, chunks)  # another model: the query side builds it
    follower = Ragloom(settings, vectors=store).context.embedder
    assert follower.model_id == tiny.model_id and follower.dimension == 32


_NO_OP_SYNC = """
import json, pickle, sys
from dataclasses import replace
from ragloom.embedding import make_embedder
from ragloom.indexing.vectors import sync_vectors
from ragloom.settings import Settings
from ragloom.stores.weaviate import WeaviateStore
chunks = pickle.loads(open(sys.argv[1], "rb").read())
embedder = make_embedder({"backend": "torch", "device": "cpu", "dtype": "fp32"})
with WeaviateStore.connect(replace(Settings.from_env(), collection_prefix=sys.argv[2])) as store:
    report = sync_vectors(store, embedder, "recursive", chunks)
print(json.dumps({"inserted": report.inserted, "unchanged": report.unchanged, "torch": "torch" in sys.modules}))
"""


def test_a_sync_with_nothing_new_never_loads_the_torch_model(store, documents, chunker, tmp_path):
    """The torch embedder (backend auto's choice for passages on a CPU with AMX, and on a GPU) loads its model at
    the first encode: a scheduled re-run with nothing new pays no torch import (~5 s) in its process."""
    import pickle
    import subprocess
    import sys

    chunks = chunker.chunk_many(documents[:3])
    torch_fp32 = make_embedder({"backend": "torch", "device": "cpu", "dtype": "fp32"})
    assert sync_vectors(store, torch_fp32, STRATEGY, chunks).inserted == len(chunks)
    (tmp_path / "chunks.pkl").write_bytes(pickle.dumps(chunks))
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _NO_OP_SYNC, str(tmp_path / "chunks.pkl"), store.prefix],
                          cwd=repo, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"inserted": 0, "unchanged": len(chunks), "torch": False}
