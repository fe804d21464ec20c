"""`ragloom metadata migrate` on the real Weaviate: a collection laid out by the code before issue #29 (each
``meta_`` property typed by its first value) in, the layout out; the same queries answer the same; a second run
changes nothing; a run cut short after the old collection was dropped is finished by the next one."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pytest

from ragloom.errors import StoreError
from ragloom.filters import bind, build_where, parse_filters
from ragloom.metadata import MetadataLayout
from ragloom.stores.analysis import ANALYZER
from ragloom.stores.weaviate.migrate import STAGING, MigrationReport
from ragloom.stores.weaviate.schema import core_properties, meta_property, object_properties
from ragloom.types import Chunk, Scope

STRATEGY = "recursive"
DIMENSION = 8
# what the old code made of these values: the type of the first value written
LEGACY = {"meta_priority": "INT", "meta_status": "TEXT", "meta_published_at": "DATE", "meta_author": "TEXT",
          "meta_score": "NUMBER"}
QUERIES = [{"status": "draft"}, {"priority": 3}, {"author": "Ann"}, {"score": 0.5}, {"status": ["draft", "final"]}]


def _chunks() -> list[Chunk]:
    return [Chunk(chunk_id=f"c{i}", document_id=f"d{i}", strategy=STRATEGY, text=f"note {i}", start=0, end=6,
                  token_count=2, position=0, scope=Scope("acme") if i % 2 else Scope("globex"),
                  metadata={"priority": i % 4, "status": "draft" if i % 3 else "final", "author": "Ann",
                            "published_at": datetime(2024, 1, 1 + i, tzinfo=UTC), "score": i / 2})
            for i in range(12)]


def _legacy_collection(store) -> None:
    """The collection as the code of 5e34339 left it: core properties, and meta_ properties typed by value."""
    from weaviate.classes.config import Configure, VectorDistances
    from weaviate.classes.data import DataObject
    from weaviate.util import generate_uuid5

    name = store.collection_name(STRATEGY)
    store.client.collections.create(
        name, properties=core_properties() + [meta_property(p, t) for p, t in LEGACY.items()],
        description=json.dumps({"ragloom": "chunks", "strategy": STRATEGY, "dimension": DIMENSION, "model_id": "m",
                                "bm25": ANALYZER, "bm25_k1": 1.2, "bm25_b": 0.75}),
        vector_config=Configure.Vectors.self_provided(
            vector_index_config=Configure.VectorIndex.hnsw(distance_metric=VectorDistances.COSINE)),
        inverted_index_config=Configure.inverted_index(index_null_state=True))
    objects = []
    for i, chunk in enumerate(_chunks()):
        props = {k: v for k, v in object_properties(chunk, MetadataLayout()).items() if not k.startswith("meta_")}
        props.update({"meta_priority": chunk.metadata["priority"], "meta_status": chunk.metadata["status"],
                      "meta_published_at": chunk.metadata["published_at"], "meta_author": "Ann",
                      "meta_score": chunk.metadata["score"]})
        objects.append(DataObject(properties=props, uuid=generate_uuid5(chunk.chunk_id),
                                  vector=[1.0 + i] + [1.0] * (DIMENSION - 1)))
    result = store.client.collections.use(name).data.insert_many(objects)
    assert not result.errors


def _answers(store) -> dict[str, list[str]]:
    ids = [c.chunk_id for c in _chunks()]
    out = {}
    for spec in QUERIES:
        for scope in (Scope("acme"), Scope("globex")):
            where = build_where(scope, bind(parse_filters(spec), store.property_types(STRATEGY, refresh=True)))
            out[f"{scope.path} {spec}"] = sorted(i.chunk_id for i in store.fetch(STRATEGY, ids, where=where))
    return out


def test_migration_keeps_answers_and_is_idempotent(weaviate_store_factory):
    store = weaviate_store_factory()
    store.metadata = MetadataLayout(declared={"score": "NUMBER"})  # the operator keeps one number typed
    _legacy_collection(store)
    before = _answers(store)
    assert all(v for k, v in before.items() if k.startswith("acme")), before  # the comparison means something

    # until migrated, a collection of the old layout takes values that fit its types, and refuses a text value
    # into its INT property naming the migration
    fits = Chunk(chunk_id="fits", document_id="dfits", strategy=STRATEGY, text="later", start=0, end=5,
                 token_count=1, position=0, scope=Scope("acme"),
                 metadata={"priority": 2, "status": "final", "score": 1.5, "published_at": "2024-02-01"})
    assert store.upsert_chunks(STRATEGY, [fits], np.ones((1, DIMENSION), dtype=np.float32)) == 1
    [item] = store.fetch(STRATEGY, ["fits"])
    assert (item.metadata["meta_priority"], item.metadata["meta_status"]) == (2, "final")
    store.delete_chunks(STRATEGY, ["fits"])
    text = Chunk(chunk_id="new", document_id="dnew", strategy=STRATEGY, text="later", start=0, end=5,
                 token_count=1, position=0, scope=Scope("acme"), metadata={"priority": "high"})
    with pytest.raises(StoreError, match="ragloom metadata migrate"):
        store.upsert_chunks(STRATEGY, [text], np.ones((1, DIMENSION), dtype=np.float32))

    assert set(store.legacy_properties(STRATEGY)) == {"meta_priority", "meta_status", "meta_published_at"}
    report = store.migrate_metadata(STRATEGY)
    assert set(report.retyped) == {"meta_priority", "meta_status", "meta_published_at"}
    assert report.copied == 24 and not report.left_out  # staged, then brought back
    assert store.property_types(STRATEGY, refresh=True)["meta_priority"] == "TEXT_ARRAY"
    assert store.collection_info(STRATEGY)["model_id"] == "m"
    assert _answers(store) == before
    assert store.count(STRATEGY) == 12 and not store.exists(STRATEGY + STAGING)

    again = store.migrate_metadata(STRATEGY)
    assert not again.changed and _answers(store) == before
    assert store.upsert_chunks(STRATEGY, [text], np.ones((1, DIMENSION), dtype=np.float32)) == 1


def test_a_migration_cut_short_is_finished_by_the_next_run(weaviate_store_factory):
    store = weaviate_store_factory()
    _legacy_collection(store)
    before = _answers(store)
    # the first run stopped right after dropping the old collection: only the staging copy holds the data
    store._rebuild_from(STRATEGY, STRATEGY + STAGING, store.collection_info(STRATEGY), MigrationReport(STRATEGY))
    store.drop_collection(STRATEGY)
    assert not store.exists(STRATEGY)
    finished = store.migrate_metadata(STRATEGY)
    assert finished.copied == 12 and store.count(STRATEGY) == 12 and not store.exists(STRATEGY + STAGING)
    assert _answers(store) == before


def test_the_command_lists_migrates_then_has_nothing_to_do(weaviate_store_factory, monkeypatch, capsys):
    from ragloom.cli import main

    store = weaviate_store_factory()
    _legacy_collection(store)
    monkeypatch.setenv("RAGLOOM_COLLECTION_PREFIX", store.prefix)
    assert main(["metadata", "migrate", "--dry-run"]) == 0
    listed = capsys.readouterr().out
    assert "recursive: meta_priority INT" in listed and store.exists(STRATEGY)
    assert store.legacy_properties(STRATEGY)  # a dry run changes nothing
    assert main(["metadata", "migrate"]) == 0
    assert "recursive: retyped meta_priority, meta_published_at, meta_score, meta_status; copied 24 objects" in \
        capsys.readouterr().out
    assert main(["metadata", "migrate"]) == 0
    assert capsys.readouterr().out.strip() == "recursive: in the layout, nothing to do"
