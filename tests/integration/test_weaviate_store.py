"""WeaviateStore against the real local Weaviate: schema, idempotent writes, searches, filters, failures."""

from __future__ import annotations

import csv
import json
import socket
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from weaviate.util import generate_uuid5

from ragloom.chunking import RecursiveChunker
from ragloom.embedding import make_embedder
from ragloom.errors import StoreError
from ragloom.filters import Condition
from ragloom.metadata import MetadataError, MetadataLayout
from ragloom.stores.weaviate import WeaviateStore
from ragloom.types import Chunk, Document, Scope, sha256_hex

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "data" / "scifact"
# SciFact claims whose gold abstract (from qrels.tsv) the tests expect first; picked for clear margins.
QUERY_IDS = ("6", "9", "12")
STRATEGY = "recursive"


def _scifact() -> tuple[list[dict], dict[str, dict], dict[str, set[str]]]:
    if not SCIFACT.exists():
        pytest.fail(f"evaluation data missing: {SCIFACT}")
    corpus = {}
    with (SCIFACT / "corpus.jsonl").open() as f:
        for line in f:
            record = json.loads(line)
            corpus[record["_id"]] = record
    with (SCIFACT / "queries.jsonl").open() as f:
        queries = {q["_id"]: q for q in map(json.loads, f)}
    qrels: dict[str, set[str]] = {}
    with (SCIFACT / "qrels.tsv").open() as f:
        for row in csv.DictReader(f, delimiter="\t"):
            qrels.setdefault(row["query-id"], set()).add(row["corpus-id"])
    gold = [d for q in QUERY_IDS for d in sorted(qrels[q])]
    ids = list(dict.fromkeys([*gold, *list(corpus)[:30]]))
    return [corpus[i] for i in ids], queries, qrels


# the keys this corpus compares by range or type are declared, as an operator would (RAGLOOM_METADATA_TYPES);
# status and "Review Status" are not: stored as text
LAYOUT = MetadataLayout(declared={"year": "INT", "score": "NUMBER", "reviewed": "BOOL", "published_at": "DATE",
                                  "tags": "TEXT_ARRAY"})


def _document(i: int, record: dict) -> Document:
    text = f"{record['title']}\n\n{record['text']}"
    metadata = {
        "status": "draft" if i % 2 else "published",
        "year": 2000 + i,
        "score": i / 4,
        "reviewed": i % 3 == 0,
        "published_at": f"2021-03-{i % 28 + 1:02d}T12:00:00Z",
        "tags": ["gold" if i < len(QUERY_IDS) else "other", f"t{i % 4}"],
        "Review Status": "ok",
    }
    return Document(document_id=record["_id"], title=record["title"], text=text,
                    source_path="scifact/corpus.jsonl", format="jsonl", content_hash=sha256_hex(text),
                    metadata=metadata, scope=Scope("acme", "alice") if i % 5 == 4 else Scope())


@pytest.fixture(scope="module")
def embedder():
    return make_embedder({"backend": "onnx"})


@pytest.fixture(scope="module")
def corpus(embedder):
    records, queries, qrels = _scifact()
    documents = [_document(i, r) for i, r in enumerate(records)]
    chunks = RecursiveChunker().chunk_many(documents)
    vectors = embedder.encode([c.embed_text for c in chunks])
    return {"documents": documents, "chunks": chunks, "vectors": vectors, "queries": queries, "qrels": qrels}


@pytest.fixture(scope="module")
def store(module_weaviate_store_factory, corpus) -> WeaviateStore:
    """One collection for the read-only tests, written once."""
    store = module_weaviate_store_factory()
    store.metadata = LAYOUT
    store.ensure_collection(STRATEGY, corpus["vectors"].shape[1], model_id="test-model")
    assert store.upsert_chunks(STRATEGY, corpus["chunks"], corpus["vectors"]) == len(corpus["chunks"])
    return store


@pytest.fixture
def scratch(weaviate_store_factory) -> WeaviateStore:
    """A store with its own prefix for tests that write."""
    store = weaviate_store_factory()
    store.metadata = LAYOUT
    return store


def test_schema(store, weaviate_client):
    config = weaviate_client.collections.use(store.collection_name(STRATEGY)).config.get()
    assert config.name == store.prefix + "Recursive"
    vectors = config.vector_config["default"]
    assert vectors.vectorizer.vectorizer.value == "none"
    assert vectors.vector_index_config.distance_metric.value == "cosine"
    props = {p.name: p for p in config.properties}
    expected_types = {"chunk_id": "text", "level": "int", "heading_path": "text", "scope_path": "text",
                      "meta_status": "text[]", "meta_year": "int", "meta_score": "number", "meta_reviewed": "boolean",
                      "meta_published_at": "date", "meta_tags": "text[]", "meta_review_status": "text[]"}
    for name, data_type in expected_types.items():
        assert props[name].data_type.value == data_type, name
    assert props["chunk_id"].tokenization.value == "field"
    assert props["meta_status"].tokenization.value == "field"
    # BM25 searches bm25_text alone; text is stored, heading_path filtered (each unused index costs every write)
    assert props["bm25_text"].index_searchable and props["bm25_text"].tokenization.value == "whitespace"
    assert not props["text"].index_searchable and not props["text"].index_filterable
    assert props["heading_path"].index_filterable and not props["heading_path"].index_searchable
    assert store.collection_info(STRATEGY)["model_id"] == "test-model"
    types = store.property_types(STRATEGY)
    assert (types["meta_published_at"], types["meta_tags"], types["level"]) == ("DATE", "TEXT_ARRAY", "INT")
    with pytest.raises(StoreError):
        store.property_types("semantic")  # no such collection


def test_inventory(store, corpus):
    chunks = corpus["chunks"]
    assert store.chunk_index(STRATEGY) == {c.chunk_id: c.document_id for c in chunks}
    assert store.count(STRATEGY) == len(chunks)
    assert store.vector_dimension(STRATEGY) == 384


def test_upsert_is_idempotent(store, corpus, weaviate_client):
    chunks, vectors = corpus["chunks"][:5], corpus["vectors"][:5]
    assert store.upsert_chunks(STRATEGY, chunks, vectors) == 5
    assert store.count(STRATEGY) == len(corpus["chunks"])
    collection = weaviate_client.collections.use(store.collection_name(STRATEGY))
    obj = collection.query.fetch_object_by_id(generate_uuid5(chunks[0].chunk_id))
    assert obj.properties["chunk_id"] == chunks[0].chunk_id


def _gold(corpus, query_id: str) -> set[str]:
    return corpus["qrels"][query_id]


@pytest.mark.parametrize("query_id", QUERY_IDS)
def test_each_search_finds_the_gold_abstract(store, corpus, embedder, query_id):
    query = corpus["queries"][query_id]["text"]
    vector = embedder.encode([query])[0]
    gold = _gold(corpus, query_id)
    lanes = {
        "dense": store.near_vector(STRATEGY, vector, 5),
        "bm25": store.bm25(STRATEGY, query, 5),
        "hybrid": store.hybrid(STRATEGY, query, vector, 5),
        "hybrid_ranked": store.hybrid(STRATEGY, query, vector, 5, fusion="ranked", alpha=0.7),
    }
    for lane, items in lanes.items():
        assert items, lane
        assert items[0].document_id in gold, (lane, [i.document_id for i in items])
        assert [i.rank for i in items] == list(range(1, len(items) + 1))
        scores = [i.score for i in items]
        assert scores == sorted(scores, reverse=True)
    assert set(lanes["dense"][0].lane_scores) == {"dense"}
    assert 0.3 < lanes["dense"][0].score <= 1.0
    assert set(lanes["bm25"][0].lane_scores) == {"bm25"}
    assert set(lanes["hybrid"][0].lane_scores) == {"hybrid"}


@pytest.mark.parametrize("query_id", QUERY_IDS[:2])
def test_ids_only_searches_rank_as_whole_ones_and_carry_nothing_else(store, corpus, embedder, query_id):
    query = corpus["queries"][query_id]["text"]
    vector = embedder.encode([query])[0]
    searches = {"dense": lambda **kw: store.near_vector(STRATEGY, vector, 8, **kw),
                "bm25": lambda **kw: store.bm25(STRATEGY, query, 8, **kw),
                "hybrid": lambda **kw: store.hybrid(STRATEGY, query, vector, 8, **kw)}
    for lane, search in searches.items():
        whole, thin = search(include_vectors=True), search(include_vectors=True, ids_only=True)
        assert [(i.chunk_id, i.score, i.rank, i.lane_scores) for i in thin] == \
            [(i.chunk_id, i.score, i.rank, i.lane_scores) for i in whole], lane
        assert all(i.text == "" and i.document_id == "" and i.metadata == {"parent_id": None} for i in thin), lane
        assert all(i.text and "vector" in i.metadata for i in whole), lane


def test_items_carry_the_exact_chunk(store, corpus):
    by_id = {c.chunk_id: (c, v) for c, v in zip(corpus["chunks"], corpus["vectors"], strict=True)}
    chunk, vector = corpus["chunks"][3], corpus["vectors"][3]
    item = store.near_vector(STRATEGY, vector, 1, include_vectors=True)[0]
    assert item.chunk_id == chunk.chunk_id
    assert item.score == pytest.approx(1.0, abs=1e-4)
    assert item.text == chunk.text
    assert item.heading_path == chunk.heading_path
    meta = item.metadata
    assert (meta["start"], meta["end"], meta["level"], meta["position"]) == (
        chunk.start, chunk.end, chunk.level, chunk.position)
    assert meta["parent_id"] is None
    assert meta["title"] == chunk.metadata["title"] and meta["source_path"] == "scifact/corpus.jsonl"
    assert meta["scope_path"] == chunk.scope.path
    assert meta["meta_status"] == chunk.metadata["status"]
    assert meta["meta_published_at"].startswith(chunk.metadata["published_at"][:19])
    assert len(meta["vector"]) == 384
    assert float(np.dot(meta["vector"], by_id[chunk.chunk_id][1])) == pytest.approx(1.0, abs=1e-5)
    assert "vector" not in store.bm25(STRATEGY, chunk.text[:40], 1)[0].metadata


def test_metadata_filters_on_meta_fields(store, corpus, embedder):
    query = corpus["queries"]["9"]["text"]
    vector = embedder.encode([query])[0]
    gold = _gold(corpus, "9")
    docs = {d.document_id: d for d in corpus["documents"]}
    (gold_status,) = {docs[g].metadata["status"] for g in gold}
    other_status = "published" if gold_status == "draft" else "draft"
    same = store.near_vector(STRATEGY, vector, 20, where=Condition("status", "meta_status", "eq", gold_status))
    assert same[0].document_id in gold
    others = store.near_vector(STRATEGY, vector, 20, where=Condition("status", "meta_status", "eq", other_status))
    assert others and all(i.metadata["meta_status"] == other_status for i in others)
    assert not gold & {i.document_id for i in others}

    recent = store.bm25(STRATEGY, query, 50, where=Condition("year", "meta_year", "gte", 2020))
    assert recent and all(i.metadata["meta_year"] >= 2020 for i in recent)

    march = Condition("published_at", "meta_published_at", "lt", datetime(2021, 3, 5, tzinfo=UTC))
    early = store.hybrid(STRATEGY, query, vector, 50, where=march)
    expected = {d.document_id for d in corpus["documents"] if d.metadata["published_at"] < "2021-03-05"}
    assert early and {i.document_id for i in early} <= expected

    tagged = store.near_vector(STRATEGY, vector, 50, where=Condition("tags", "meta_tags", "eq", "gold"))
    assert {i.document_id for i in tagged} == {d.document_id for d in corpus["documents"][: len(QUERY_IDS)]}

    scoped = store.near_vector(STRATEGY, vector, 50,
                               where=Condition("scope", "scope_path", "in", Scope("acme", "alice").visible_paths()[1:]))
    assert scoped and all(i.metadata["scope_path"] == "acme/alice" for i in scoped)


def test_fetch_keeps_the_order_asked(store, corpus):
    ids = [corpus["chunks"][7].chunk_id, "no-such-chunk", corpus["chunks"][2].chunk_id]
    items = store.fetch(STRATEGY, ids)
    assert [i.chunk_id for i in items] == [ids[0], ids[2]]
    status = corpus["chunks"][7].metadata["status"]
    only = store.fetch(STRATEGY, ids, where=Condition("status", "meta_status", "eq", status))
    assert ids[0] in {i.chunk_id for i in only}
    assert all(i.metadata["meta_status"] == status for i in only)


def test_searching_a_missing_collection_is_a_clear_error(store, corpus):
    with pytest.raises(StoreError, match="does not exist"):
        store.near_vector("semantic", corpus["vectors"][0], 3)
    assert store.chunk_index("semantic") == {} and store.count("semantic") == 0


def test_a_wrong_dimension_object_is_named(scratch, corpus):
    chunks, vectors = corpus["chunks"][:3], corpus["vectors"][:3]
    scratch.ensure_collection(STRATEGY, 384)
    assert scratch.upsert_chunks(STRATEGY, chunks[:2], vectors[:2]) == 2
    # Weaviate refuses a 300-dimensional vector in a 384-dimensional index: the error names the chunk
    wrong = Chunk(**{**chunks[2].__dict__, "chunk_id": "wrong-dimension-chunk"})
    with pytest.raises(StoreError, match=r"wrong-dimension-chunk: .*(dimension|length)"):
        scratch.upsert_chunks(STRATEGY, [wrong], vectors[2:3, :300])
    assert scratch.count(STRATEGY) == 2
    assert "wrong-dimension-chunk" not in scratch.chunk_index(STRATEGY)


def test_only_the_failing_objects_fail(scratch, corpus):
    chunks = corpus["chunks"][:5]
    scratch.ensure_collection(STRATEGY, 384)
    vectors = corpus["vectors"][:5].copy()
    vectors[1] = np.nan  # Weaviate itself would store these and rank them with NaN scores
    vectors[3] = 0.0
    result = scratch.write_chunks(STRATEGY, chunks, vectors)
    assert result.failed.keys() == {chunks[1].chunk_id, chunks[3].chunk_id}
    assert "NaN" in result.failed[chunks[1].chunk_id] and "zeros" in result.failed[chunks[3].chunk_id]
    assert result.written == 3
    assert set(scratch.chunk_index(STRATEGY)) == {chunks[i].chunk_id for i in (0, 2, 4)}
    with pytest.raises(StoreError, match=chunks[1].chunk_id):
        scratch.upsert_chunks(STRATEGY, chunks[:2], vectors[:2])


def test_a_value_a_declared_type_cannot_hold_is_refused_before_writing(scratch, corpus):
    first = corpus["chunks"][0]
    scratch.ensure_collection(STRATEGY, 384)
    assert scratch.upsert_chunks(STRATEGY, [first], corpus["vectors"][:1]) == 1
    clash = replace(corpus["chunks"][1], metadata={**corpus["chunks"][1].metadata, "published_at": "next spring"})
    with pytest.raises(MetadataError, match=r"'published_at': 'next spring' is not an ISO 8601 date"):
        scratch.upsert_chunks(STRATEGY, [clash], corpus["vectors"][1:2])
    assert scratch.count(STRATEGY) == 1


def test_delete_chunks(scratch, corpus):
    chunks, vectors = corpus["chunks"][:6], corpus["vectors"][:6]
    scratch.ensure_collection(STRATEGY, 384)
    assert scratch.upsert_chunks(STRATEGY, chunks, vectors) == 6
    gone = [chunks[1].chunk_id, chunks[4].chunk_id, "never-written"]
    assert scratch.delete_chunks(STRATEGY, gone) == 2
    assert set(scratch.chunk_index(STRATEGY)) == {c.chunk_id for c in chunks} - set(gone)
    assert scratch.delete_chunks(STRATEGY, []) == 0


def test_every_change_stamps_a_new_version_without_touching_the_schema(scratch, corpus, weaviate_client):
    """Result caches key on the stamp; it is data, so no write updates the collection's config (a config update
    makes the shards read-only for a moment: concurrent syncs failed on it)."""
    chunks, vectors = corpus["chunks"][:3], corpus["vectors"][:3]
    scratch.ensure_collection(STRATEGY, 384)
    scratch.ensure_collection("headered", 384)
    assert scratch.collection_version(STRATEGY) == ""  # nothing written yet: nothing to cache under
    config = weaviate_client.collections.use(scratch.collection_name(STRATEGY)).config
    schema_before = {k: v for k, v in config.get().to_dict().items() if k != "properties"}  # meta_ ones are added
    seen = set()
    for change in (lambda: scratch.upsert_chunks(STRATEGY, chunks, vectors),
                   lambda: scratch.upsert_chunks(STRATEGY, chunks[:1], vectors[:1]),
                   lambda: scratch.delete_chunks(STRATEGY, [chunks[2].chunk_id])):
        change()
        stamp = scratch.collection_version(STRATEGY)
        assert stamp and stamp not in seen
        seen.add(stamp)
    assert scratch.delete_chunks(STRATEGY, ["never-written"]) == 0
    assert scratch.collection_version(STRATEGY) == stamp  # nothing changed: the same stamp
    assert {k: v for k, v in config.get().to_dict().items() if k != "properties"} == schema_before
    assert scratch.collection_version("headered") == ""  # stamps are per collection
    scratch.drop_collection(STRATEGY)
    assert scratch.collection_version(STRATEGY) == ""
    assert weaviate_client.collections.exists(scratch.versions_name)  # headered is still there
    scratch.drop_collection("headered")
    assert not weaviate_client.collections.exists(scratch.versions_name)  # nothing left under the prefix


def test_ensure_collection_refuses_another_dimension(scratch, corpus):
    scratch.ensure_collection(STRATEGY, 384, model_id="a")
    scratch.ensure_collection(STRATEGY, 384, model_id="a")  # idempotent
    with pytest.raises(StoreError, match="not 768"):
        scratch.ensure_collection(STRATEGY, 768)
    with pytest.raises(StoreError, match="indexed with 'a'"):
        scratch.ensure_collection(STRATEGY, 384, model_id="b")


def test_drop_collections_only_touches_its_prefix(scratch, store, weaviate_client):
    scratch.ensure_collection("recursive", 384)
    scratch.ensure_collection("headered", 384)
    assert sorted(scratch.drop_collections()) == sorted([scratch.collection_name("recursive"),
                                                         scratch.collection_name("headered"), scratch.versions_name])
    assert weaviate_client.collections.exists(store.collection_name(STRATEGY))


def test_connect_from_settings(settings, namespace):
    with WeaviateStore.connect(replace(settings, collection_prefix=namespace,
                                       weaviate_write_timeout_seconds=12.5)) as store:
        assert store.prefix == namespace
        assert store.client._connection.timeout_config.insert == 12.5  # the client's own default is 90 s
        assert store.client.is_ready()
        assert store.count("recursive") == 0
    assert not store.client.is_connected()


def test_connect_to_nothing_is_a_clear_error(settings):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nobody listens there
    with pytest.raises(StoreError, match="unreachable"):
        WeaviateStore.connect(replace(settings, weaviate_http_port=port, weaviate_grpc_port=port))


def test_another_backend_of_the_recorded_model_is_accepted_and_recorded_models_lists_it(scratch):
    scratch.ensure_collection(STRATEGY, 384, model_id="all-MiniLM-L6-v2|torch|384")
    scratch.ensure_collection(STRATEGY, 384, model_id="all-MiniLM-L6-v2|onnx-int8|384|recipe-v2")  # same weights
    with pytest.raises(StoreError, match="another model"):
        scratch.ensure_collection(STRATEGY, 384, model_id="another-model|torch|384")
    assert scratch.recorded_models() == {scratch.collection_name(STRATEGY): "all-MiniLM-L6-v2|torch|384"}


def test_insert_requests_in_flight_write_everything_and_name_each_failure(scratch, corpus, monkeypatch):
    import threading

    from ragloom.stores.weaviate import writes

    chunks = corpus["chunks"][:22]
    vectors = corpus["vectors"][:22].copy()
    vectors[5] = np.nan  # in the second request
    vectors[17] = 0.0  # in the fifth
    monkeypatch.setattr(writes, "INSERT_BATCH", 4)
    inner, lock, state = writes.Writes._insert, threading.Lock(), {"now": 0, "most": 0}
    three_in_flight = threading.Event()

    def counted(collection, objects, indexes):
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
            if state["now"] == 3:
                three_in_flight.set()
        try:
            # requests sent together are all in flight before any is answered; one at a time never reaches three
            three_in_flight.wait(timeout=10)
            return inner(collection, objects, indexes)
        finally:
            with lock:
                state["now"] -= 1

    monkeypatch.setattr(writes.Writes, "_insert", staticmethod(counted))
    scratch.write_requests = 3
    scratch.ensure_collection(STRATEGY, 384)
    result = scratch.write_chunks(STRATEGY, chunks, vectors)
    assert state["most"] == 3
    assert result.failed.keys() == {chunks[5].chunk_id, chunks[17].chunk_id}
    assert result.written == 20
    assert set(scratch.chunk_index(STRATEGY)) == {c.chunk_id for i, c in enumerate(chunks) if i not in (5, 17)}


def test_a_sync_with_requests_in_flight_writes_batches_that_fill_them(scratch, corpus, embedder, monkeypatch):
    from ragloom.indexing import vectors as vector_sync

    monkeypatch.setattr(vector_sync, "INSERT_BATCH", 4)
    sizes: list[int] = []
    inner = scratch.write_chunks
    monkeypatch.setattr(scratch, "write_chunks", lambda s, c, v: sizes.append(len(c)) or inner(s, c, v))
    scratch.write_requests = 3
    chunks = corpus["chunks"][:30]
    report = vector_sync.sync_vectors(scratch, embedder, STRATEGY, chunks, batch_size=2)
    assert sizes == [12, 12, 6]  # max(2, 4 x 3) objects per write
    assert report.inserted == 30 and set(scratch.chunk_index(STRATEGY)) == {c.chunk_id for c in chunks}
    assert vector_sync.sync_vectors(scratch, embedder, STRATEGY, chunks, batch_size=2).inserted == 0
