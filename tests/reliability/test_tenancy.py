"""Issue #29: one tenant cannot shape another's schema. Every tenant's chunks share one collection per chunking,
so metadata types must not be fixed, learned or clashed over by whoever writes a key first.

The service in-process over the real Weaviate and Neo4j (``service_harness``); ingestion through the same
``collect_documents`` and ``sync_vectors`` the Dagster assets call. Each of the first three tests failed on the
commit before the metadata layout (5e34339): a 503 telling the stored type, a 503 refusing the second tenant's
write, and a sync that failed for every document of the batch.
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from reliability_support import STRATEGY, HashEmbedder
from service_harness import running_service

from ragloom.indexing.vectors import sync_vectors
from ragloom.ingest import Source, collect_documents
from ragloom.types import Chunk, Scope, make_chunk_id


@pytest.fixture(scope="module")
def service(settings, module_weaviate_store_factory, module_neo4j_store_factory, tmp_path_factory):
    tag = uuid.uuid4().hex[:8]
    vectors, graph = module_weaviate_store_factory(f"Ten{tag}"), module_neo4j_store_factory(f"ten_{tag}")
    with running_service(settings, vectors, graph, tmp_path_factory.mktemp("tenancy")) as harness:
        yield harness


def headers(key) -> dict[str, str]:
    return {"Authorization": f"Bearer {key.key}"}


def inject(service, key, metadata, text="a note about the Helios budget review"):
    return service.client.post("/v1/inject", json={"text": text, "scope": f"{key.scope.path}/c0",
                                                   "metadata": metadata}, headers=headers(key))


def query(service, key, filters, text="Helios budget review", k=50):
    r = service.client.post("/v1/query", json={"query": text, "strategy": "bm25", "k": k, "filters": filters,
                                               "scope": f"{key.scope.path}/c0", "options": {"abstain": False}},
                            headers=headers(key))
    assert r.status_code == 200, r.text
    return r.json()["items"]


def test_a_write_never_tells_which_type_another_tenant_fixed(service):
    """The oracle: globex wrote ``year`` as a number and ``effective_date`` as a date first; acme's text values
    for both get the same answer as a key nobody ever used, and a declared key's refusal names the caller's own
    key and value, never a type read from the store."""
    globex, acme = service.tenant_key(1, "u0"), service.tenant_key(0, "u0")
    tag = uuid.uuid4().hex[:6]
    first = inject(service, globex, {f"year{tag}": 2020, f"effective_date{tag}": "2024-01-05"})
    assert first.status_code == 201, first.text
    probes = {"taken": inject(service, acme, {f"year{tag}": "abc", f"effective_date{tag}": "soon"}),
              "fresh": inject(service, acme, {f"never{tag}": "abc", f"used{tag}": "soon"})}
    assert {name: r.status_code for name, r in probes.items()} == {"taken": 201, "fresh": 201}, \
        {name: r.text for name, r in probes.items()}
    refused = inject(service, acme, {"created": "last tuesday"})  # `created` is declared DATE (a documented type)
    assert refused.status_code == 400, refused.text
    detail = refused.text
    assert "'created'" in detail and "last tuesday" in detail
    for stored in ("since its first value", "INT", "property", "meta_"):
        assert stored not in detail, (stored, detail)


def test_one_tenant_cannot_refuse_another_tenants_write(service):
    """The write denial: globex claims ``priority`` with a number first; acme's text value is written and each
    tenant's equality filter finds its own item and never the other's."""
    globex, acme = service.tenant_key(1, "u0"), service.tenant_key(0, "u0")
    key = f"priority{uuid.uuid4().hex[:6]}"
    assert inject(service, globex, {key: 1}).status_code == 201
    r = inject(service, acme, {key: "high"})
    assert r.status_code == 201, r.text
    mine = query(service, acme, {key: "high"})
    assert [i["scope"] for i in mine] == [f"{acme.scope.path}/c0"]
    assert query(service, globex, {key: 1}) and not query(service, globex, {key: "high"})
    assert not query(service, acme, {key: 1})  # globex's item: another tenant's, never visible


def test_one_documents_metadata_never_fails_the_sync_for_everyone(weaviate_store_factory, tmp_path):
    """The ingestion failure: globex's document made ``version`` a number; a later sync bringing acme's
    ``version: "2.0-beta"`` wrote nothing of its batch before. Now every chunk lands. And a document whose value a
    declared key cannot hold is rejected with its reason when documents are collected; the rest go on."""
    store = weaviate_store_factory()
    embedder = HashEmbedder()

    def chunk(doc: str, scope: Scope, text: str, **metadata) -> Chunk:
        return Chunk(chunk_id=make_chunk_id(doc, STRATEGY, "whole", 0, len(text), text), document_id=doc,
                     strategy=STRATEGY, text=text, start=0, end=len(text), token_count=len(text.split()), position=0,
                     scope=scope, metadata={"title": doc, **metadata})

    first = [chunk("docs/globex.md", Scope("globex"), "Globex release notes", version=3)]
    sync_vectors(store, embedder, STRATEGY, first)
    second = [*first, chunk("docs/acme.md", Scope("acme"), "Acme release notes", version="2.0-beta"),
              chunk("docs/acme2.md", Scope("acme"), "Acme handbook")]
    report = sync_vectors(store, embedder, STRATEGY, second)
    assert report.inserted == 2 and report.collection_size == 3 and report.rejected == 0

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nA fine document.")
    (docs / "bad.md").write_text("# Bad\n\nIts sidecar says when it was created in words.")
    (docs / "bad.md.meta.json").write_text(json.dumps({"metadata": {"created": "last tuesday"}}))
    collected = collect_documents([Source("docs", docs)], None, log=lambda _: None, metadata=store.metadata)
    assert [d.document_id for d in collected.documents] == ["docs/good.md"]
    [rejection] = collected.rejections
    assert rejection.source_path.endswith("bad.md") and rejection.reason == "metadata"
    assert "'created'" in rejection.detail and "last tuesday" in rejection.detail


def test_a_collection_full_of_keys_refuses_new_ones_per_item(weaviate_store_factory):
    """The properties cap: an item bringing a key past it is refused (the writer's error), the rest of the batch
    is written, keys already there stay writable, and declared keys are not counted."""
    from ragloom.metadata import MetadataLayout

    store = weaviate_store_factory()
    store.metadata = MetadataLayout(max_properties=2)
    chunks = [Chunk(chunk_id=f"c{i}", document_id=f"d{i}", strategy=STRATEGY, text=f"text {i}", start=0, end=6,
                    token_count=2, position=0, scope=Scope("acme"), metadata=meta)
              for i, meta in enumerate([{"a": 1, "b": 2}, {"c": 3}, {"a": "x"}, {}, {"author": "Ann"}])]
    store.ensure_collection(STRATEGY, HashEmbedder().dimension)
    result = store.write_chunks(STRATEGY, chunks, np.ones((5, HashEmbedder().dimension), dtype=np.float32))
    assert result.written == 4 and not result.failed
    assert list(result.rejected) == ["c1"] and "RAGLOOM_METADATA_MAX_PROPERTIES" in result.rejected["c1"]
    assert "'c'" in result.rejected["c1"]


def test_a_filter_on_author_finds_files_and_injected_items_alike(service, tmp_path):
    """``author`` is declared: a Word file's author (read by the parser) and an injected item's are the same
    property, and one filter finds both."""
    import docx

    acme = service.tenant_key(0, "u0")
    author = f"Ann Lee {uuid.uuid4().hex[:6]}"
    path = tmp_path / "docs" / "memo.docx"
    path.parent.mkdir()
    document = docx.Document()
    document.add_paragraph("The Helios budget review memo, written for the whole team.")
    document.core_properties.author = author
    document.save(path)
    collected = collect_documents([Source("docs", path.parent)], None, log=lambda _: None)
    [doc] = collected.documents
    assert doc.metadata["author"] == author
    chunk = Chunk(chunk_id=make_chunk_id(doc.document_id, STRATEGY, "whole", 0, len(doc.text), doc.text),
                  document_id=doc.document_id, strategy=STRATEGY, text=doc.text, start=0, end=len(doc.text),
                  token_count=len(doc.text.split()), position=0, scope=acme.scope,
                  metadata={**doc.metadata, "title": doc.title, "source_path": doc.source_path})
    service.rag.context.vectors.upsert_chunks(STRATEGY, [chunk], HashEmbedder().encode([chunk.text]))
    assert inject(service, acme, {"author": author}).status_code == 201
    found = query(service, acme, {"author": author})
    assert sorted(i["dynamic"] for i in found) == [False, True]
    assert all(i["metadata"]["meta_author"] == author for i in found)
    assert query(service, acme, {"author": {"contains": author.split()[-1]}})


# property: random tenants, random metadata ----------------------------------------------------------------------

scalars = st.one_of(st.booleans(), st.integers(-1000, 1000), st.sampled_from(["high", "low", "2024-01-05", "1", "x y"]),
                    st.floats(-10, 10, allow_nan=False).map(lambda f: round(f, 2)))
values = st.one_of(scalars, st.lists(scalars, min_size=1, max_size=3))
KEYS = ["priority", "version", "year", "tags", "effective_date", "flag", "Review Status"]  # none declared
writes = st.lists(st.tuples(st.integers(0, 1), st.dictionaries(st.sampled_from(KEYS), values, min_size=1,
                                                                  max_size=3)), min_size=2, max_size=5)


@hsettings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(plan=writes)
def test_random_tenants_never_change_each_others_writes_or_results(service, plan):
    """Two tenants write random values under the same (undeclared) keys in a random order: every write is
    accepted whatever the other wrote before, and each is found by its own tenant's equality filter on each of
    its keys, never by the other tenant's."""
    tag = uuid.uuid4().hex[:6]
    keys = [service.tenant_key(0, "u0"), service.tenant_key(1, "u0")]
    for who, metadata in plan:
        metadata = {f"{k}{tag}": v for k, v in metadata.items()}
        marker = f"marker{uuid.uuid4().hex[:10]}"
        r = inject(service, keys[who], metadata, text=f"{marker} Helios budget review")
        assert r.status_code == 201, (metadata, r.text)
        for key, value in metadata.items():
            probe = value[0] if isinstance(value, list) else value
            mine = [i["text"] for i in query(service, keys[who], {key: probe}, text=marker)]
            assert any(marker in t for t in mine), (key, value, mine)
            theirs = [i["text"] for i in query(service, keys[1 - who], {key: probe}, text=marker)]
            assert not any(marker in t for t in theirs)
