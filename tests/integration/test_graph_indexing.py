"""sync_graph against the real Neo4j with spaCy on MuSiQue paragraphs: ingest, re-ingest, change, delete, resume."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ragloom.errors import ConfigError, StoreError
from ragloom.extraction import EntityExtractor, load_nlp
from ragloom.indexing.graph import sync_graph
from ragloom.indexing.synonyms import SynonymParams
from ragloom.stores.neo4j import Neo4jStore, decode_vectors
from ragloom.types import Chunk, make_chunk_id

MUSIQUE = Path(__file__).resolve().parents[3] / "shared" / "data" / "musique" / "corpus.jsonl"
# Three documents made of real paragraphs; "Tennessee", "American" and the House of Representatives recur.
DOCUMENTS = {
    "tennessee": ["mq0026", "mq1000"],
    "politicians": ["mq1617", "mq1618", "mq1622"],
    "places": ["mq1170", "mq1870"],
}
STRATEGY = "recursive"


@pytest.fixture(scope="module")
def paragraphs() -> dict[str, str]:
    if not MUSIQUE.exists():
        pytest.fail(f"evaluation data missing: {MUSIQUE} (see ../shared/data/README.md)")
    wanted = {pid for ids in DOCUMENTS.values() for pid in ids} | {"mq1626"}
    with MUSIQUE.open(encoding="utf-8") as handle:
        rows = (json.loads(line) for line in handle)
        return {r["_id"]: r["text"] for r in rows if r["_id"] in wanted}


@pytest.fixture(scope="module")
def extractor() -> EntityExtractor:
    return EntityExtractor(load_nlp())


def make_chunks(document_id: str, texts: list[str]) -> list[Chunk]:
    chunks, offset = [], 0
    for position, text in enumerate(texts):
        start, end = offset, offset + len(text)
        chunks.append(Chunk(chunk_id=make_chunk_id(document_id, STRATEGY, "test", start, end, text),
                            document_id=document_id, strategy=STRATEGY, text=text, start=start, end=end,
                            token_count=len(text.split()), position=position))
        offset = end + 2
    return chunks


@pytest.fixture
def corpus(paragraphs) -> dict[str, list[Chunk]]:
    return {doc: make_chunks(doc, [paragraphs[p] for p in ids]) for doc, ids in DOCUMENTS.items()}


@pytest.fixture
def store(neo4j_store_factory, namespace) -> Neo4jStore:
    return neo4j_store_factory(namespace)


def everything(corpus: dict[str, list[Chunk]]) -> list[Chunk]:
    return [c for chunks in corpus.values() for c in chunks]


def snapshot(driver, ns: str) -> dict:
    """The whole graph of a namespace as plain data (names left out: the stored name is whichever came first)."""
    def rows(query: str) -> list[dict]:
        records, _, _ = driver.execute_query(query, ns=ns)
        return [r.data() for r in records]

    return {
        "entities": {(r["id"], r["type"], r["chunk_count"]) for r in rows(
            "MATCH (e:Entity {ns: $ns}) RETURN e.entity_id AS id, e.type AS type, e.chunk_count AS chunk_count")},
        "mentions": {(r["c"], r["e"]): r["n"] for r in rows(
            "MATCH (c:Chunk {ns: $ns})-[m:MENTIONS]->(e) RETURN c.chunk_id AS c, e.entity_id AS e, m.count AS n")},
        "relations": {(r["s"], r["t"], r["type"]): (r["w"], tuple(sorted(zip(r["ids"], r["ws"], strict=True))))
                      for r in rows("MATCH (a:Entity {ns: $ns})-[r:RELATED_TO]->(b) RETURN a.entity_id AS s, "
                                    "b.entity_id AS t, r.type AS type, r.weight AS w, r.chunk_ids AS ids, "
                                    "r.chunk_weights AS ws")},
        "next": {(r["a"], r["b"]) for r in rows("MATCH (a:Chunk {ns: $ns})-[:NEXT]->(b) "
                                                "RETURN a.chunk_id AS a, b.chunk_id AS b")},
        "documents": {r["d"] for r in rows("MATCH (d:Document {ns: $ns}) RETURN d.document_id AS d")},
        "chunk_props": {r["c"]: (r["doc"], r["pos"]) for r in rows(
            "MATCH (c:Chunk {ns: $ns}) RETURN c.chunk_id AS c, c.document_id AS doc, c.position AS pos")},
    }


def entity_named(store: Neo4jStore, key: str) -> str | None:
    rows = store.entities_by_names([key])
    return rows[0]["entity_id"] if rows else None


def assert_consistent(graph: dict, chunks: list[Chunk]) -> None:
    ids = {c.chunk_id for c in chunks}
    assert set(graph["chunk_props"]) == ids
    assert graph["chunk_props"] == {c.chunk_id: (c.document_id, c.position) for c in chunks}
    expected_next = set()
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.document_id, []).append(c)
    for doc_chunks in by_doc.values():
        doc_chunks.sort(key=lambda c: c.position)
        expected_next |= {(a.chunk_id, b.chunk_id) for a, b in zip(doc_chunks, doc_chunks[1:], strict=False)}
    assert graph["next"] == expected_next
    assert graph["documents"] == set(by_doc)
    mentioned = {e for _, e in graph["mentions"]}
    assert {e for e, _, _ in graph["entities"]} == mentioned  # no orphan entities
    chunks_of = Counter(e for _, e in graph["mentions"])
    assert {e: n for e, _, n in graph["entities"]} == chunks_of  # chunk_count: distinct chunks mentioning it
    for (source, target, _), (weight, evidence) in graph["relations"].items():
        assert source in mentioned and target in mentioned
        assert evidence and weight == sum(w for _, w in evidence)
        assert {cid for cid, _ in evidence} <= ids


def test_ingest_then_reingest_changes_nothing(store, extractor, corpus, neo4j_driver, namespace):
    chunks = everything(corpus)
    messages: list[str] = []
    assert store.graph_version(STRATEGY) is None  # never synced
    first = sync_graph(store, extractor, STRATEGY, chunks, log=messages.append)
    assert first.version and store.graph_version(STRATEGY) == first.version
    assert (first.chunks_added, first.chunks_removed, first.chunks_unchanged) == (len(chunks), 0, 0)
    assert first.entities > 10 and first.mentions >= first.entities and first.relations > 0
    assert first.extract_seconds > 0 and first.write_seconds > 0 and 0 <= first.merge_ratio < 1
    assert any("extracted" in m for m in messages)
    graph = snapshot(neo4j_driver, namespace)
    assert_consistent(graph, chunks)
    tennessee = entity_named(store, "tennessee")
    assert tennessee is not None
    assert {c for c, e in graph["mentions"] if e == tennessee} == {c.chunk_id for c in chunks}
    assert store.empty_entity_names() == 0 and store.dangling_mentions() == 0
    assert store.chunk_ids(STRATEGY) <= {c.chunk_id for c in chunks}  # no chunk the sync did not write
    assert any(t != "CO_OCCURS" for _, _, t in graph["relations"])  # SVO triples made it in

    again = sync_graph(store, extractor, STRATEGY, chunks)
    assert (again.chunks_added, again.chunks_removed, again.chunks_unchanged) == (0, 0, len(chunks))
    assert again.entities == again.mentions == again.relations == 0 and not again.changed
    assert snapshot(neo4j_driver, namespace) == graph
    assert again.version == "" and store.graph_version(STRATEGY) == first.version  # unchanged graph, same version

    # Moving a document to another scope changes what a scoped reader may see: a new version.
    tennessee_doc = corpus["tennessee"]
    assert store.rescope_document("tennessee", [tennessee_doc[0].scope.path], "acme") == len(tennessee_doc)
    moved = store.graph_version(STRATEGY)
    assert moved not in (None, first.version)
    assert store.rescope_document("tennessee", ["nobody"], "acme") == 0 and store.graph_version(STRATEGY) == moved


def test_change_and_delete_documents(store, extractor, corpus, paragraphs, neo4j_store_factory, neo4j_driver,
                                     namespace):
    versions = [sync_graph(store, extractor, STRATEGY, everything(corpus)).version]
    before = snapshot(neo4j_driver, namespace)
    tennessee_chunks = next(n for e, _, n in before["entities"] if e == entity_named(store, "tennessee"))
    old_chunk = corpus["politicians"][1]  # Samuel Axley Smith
    smith, tennessee = entity_named(store, "samuel axley smith"), entity_named(store, "tennessee")
    assert smith and tennessee
    shared_relations = {k: v for k, v in before["relations"].items() if any(c == old_chunk.chunk_id for c, _ in v[1])
                        and len(v[1]) > 1}
    assert shared_relations, "the paragraph should share some relation evidence with another chunk"

    # Change a document: its middle paragraph is replaced. The last paragraph moves (its offsets change), so
    # it gets a new chunk id too, as the chunkers would give it.
    texts = [paragraphs["mq1617"], paragraphs["mq1626"], paragraphs["mq1622"]]
    old_ids = {c.chunk_id for c in corpus["politicians"]}
    corpus["politicians"] = make_chunks("politicians", texts)
    new_ids = {c.chunk_id for c in corpus["politicians"]}
    removed, added = old_ids - new_ids, new_ids - old_ids
    assert old_chunk.chunk_id in removed and len(removed) == len(added) == 2
    report = sync_graph(store, extractor, STRATEGY, everything(corpus))
    assert (report.chunks_added, report.chunks_removed, report.documents_touched) == (2, 2, 1)
    assert report.chunks_unchanged == len(everything(corpus)) - 2
    assert report.entities_deleted >= 1
    after = snapshot(neo4j_driver, namespace)
    assert_consistent(after, everything(corpus))
    assert entity_named(store, "samuel axley smith") is None  # orphan gone
    assert entity_named(store, "robert malone bugg") is not None
    assert entity_named(store, "tennessee") == tennessee  # shared entity kept, same id
    versions.append(store.graph_version(STRATEGY))
    assert report.version == versions[-1] != versions[0]
    for key, (weight, evidence) in shared_relations.items():
        kept = {c: w for c, w in evidence if c not in removed}
        if key not in after["relations"]:
            assert not kept  # only the removed chunks supported it
            continue
        new_weight, new_evidence = after["relations"][key]
        new_evidence = dict(new_evidence)
        assert not removed & set(new_evidence)  # evidence of removed chunks withdrawn
        assert {c: new_evidence[c] for c in kept} == kept  # the rest untouched
        assert new_weight == weight - sum(w for c, w in evidence if c in removed) + \
            sum(w for c, w in new_evidence.items() if c in added)

    # Delete a document.
    places = corpus.pop("places")
    hookers_bend = entity_named(store, "hookers bend")
    assert hookers_bend
    report = sync_graph(store, extractor, STRATEGY, everything(corpus))
    assert (report.chunks_added, report.chunks_removed, report.documents_deleted) == (0, len(places), 1)
    final = snapshot(neo4j_driver, namespace)
    assert_consistent(final, everything(corpus))
    assert entity_named(store, "hookers bend") is None
    assert entity_named(store, "tennessee") == tennessee
    # "Tennessee" lost the chunks of the deleted document that named it; every other count is exact as well
    # (assert_consistent), and unchanged entities keep theirs.
    lost = sum(1 for c in places if (c.chunk_id, tennessee) in after["mentions"])
    assert lost and next(n for e, _, n in final["entities"] if e == tennessee) == \
        next(n for e, _, n in after["entities"] if e == tennessee) - lost
    assert tennessee_chunks == sum(1 for c, e in before["mentions"] if e == tennessee)
    assert report.version == store.graph_version(STRATEGY) not in versions
    assert store.chunk_ids(STRATEGY) <= {c.chunk_id for c in everything(corpus)}

    # The incrementally maintained graph equals one built from scratch from the final chunks.
    scratch = neo4j_store_factory(namespace + "_scratch")
    sync_graph(scratch, extractor, STRATEGY, everything(corpus))
    assert snapshot(neo4j_driver, scratch.namespace) == final


def test_resumes_chunks_whose_extraction_was_not_written(store, extractor, corpus, neo4j_store_factory, neo4j_driver,
                                                         namespace):
    chunks = everything(corpus)
    store.ensure_schema()
    store.upsert_chunks(chunks[:3])  # as if a run died after writing chunk nodes, before their entities
    report = sync_graph(store, extractor, STRATEGY, chunks)
    assert report.chunks_added == len(chunks)
    complete = neo4j_store_factory(namespace + "_complete")
    sync_graph(complete, extractor, STRATEGY, chunks)
    assert snapshot(neo4j_driver, namespace) == snapshot(neo4j_driver, complete.namespace)
    assert all(extracted for _, extracted in store.chunk_states(STRATEGY).values())


def test_hostile_text_is_data(store, extractor, corpus, neo4j_driver, namespace):
    chunks = everything(corpus)
    sync_graph(store, extractor, STRATEGY, chunks)
    count = len(store.chunk_ids())
    text = 'Acme"}) DETACH DELETE n // was founded by John Smith in Paris. MATCH (n) DETACH DELETE n'
    hostile = make_chunks('doc"}) DETACH DELETE n //', [text])
    sync_graph(store, extractor, STRATEGY, chunks + hostile)
    assert len(store.chunk_ids()) == count + 1
    assert_consistent(snapshot(neo4j_driver, namespace), chunks + hostile)
    assert entity_named(store, "john smith") is not None


def test_chunks_of_another_strategy_are_refused(store, extractor, corpus):
    with pytest.raises(ConfigError, match="strategy"):
        sync_graph(store, extractor, "headered", everything(corpus))


def musique_chunks(n: int) -> list[Chunk]:
    with MUSIQUE.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for _, line in zip(range(n), handle, strict=False)]
    return [c for r in rows for c in make_chunks(r["_id"], [r["text"]])]


class FailingSecondWave(Neo4jStore):
    """Dies on the second wave's write, like a Neo4j outage in the middle of a long ingest."""

    writes = 0

    def write_extraction(self, extraction, chunk_ids):
        self.writes += 1
        if self.writes == 2:
            raise StoreError("neo4j (write): injected outage")
        return super().write_extraction(extraction, chunk_ids)


def test_waves_are_written_while_workers_extract_and_a_failed_wave_resumes(store, neo4j_store_factory, neo4j_driver,
                                                                           namespace):
    chunks = musique_chunks(60)
    waving = EntityExtractor(load_nlp(), n_process=2, batch_size=8, parallel_min_chunks=16, min_wave_chunks=20)
    assert waving.waves_for(len(chunks)) == 3

    failing = neo4j_store_factory(namespace, cls=FailingSecondWave)
    with pytest.raises(StoreError, match="injected outage"):
        sync_graph(failing, waving, STRATEGY, chunks)
    states = store.chunk_states(STRATEGY)
    assert sum(extracted for _, extracted in states.values()) == 20  # the first wave stayed done
    stamped = store.graph_version(STRATEGY)
    assert stamped is not None  # the first wave changed the graph: readers must reload, failure or not

    report = sync_graph(store, waving, STRATEGY, chunks)
    assert report.chunks_added == 40 and report.write_work_seconds >= report.write_seconds > 0
    assert report.version == store.graph_version(STRATEGY) != stamped
    graph = snapshot(neo4j_driver, namespace)
    assert_consistent(graph, chunks)
    assert all(extracted for _, extracted in store.chunk_states(STRATEGY).values())
    assert store.dangling_mentions() == 0 and store.empty_entity_names() == 0

    fresh = neo4j_store_factory(namespace + "_waves")
    whole = sync_graph(fresh, waving, STRATEGY, chunks)
    waved = snapshot(neo4j_driver, fresh.namespace)
    assert (whole.entities, whole.mentions, whole.relations) == \
        (len(waved["entities"]), len(waved["mentions"]), len(waved["relations"]))
    assert_consistent(waved, chunks)
    again = sync_graph(fresh, waving, STRATEGY, chunks)
    assert not again.changed and snapshot(neo4j_driver, fresh.namespace) == waved


# --- entity-name embeddings and synonym edges -------------------------------------------------------------

BANK_TEXTS = {
    "results": ["Deutsche Bank AG reported its quarterly results in Frankfurt on Monday."],
    "analysts": ["Analysts at Deutsche Bank expect the barrier in London to be replaced."],
}


@pytest.fixture(scope="module")
def embedder(settings):
    from ragloom.embedding import make_embedder

    return make_embedder(settings)


def embeddings(driver, ns: str) -> dict[str, tuple[str, tuple[float, ...] | None, str | None]]:
    records, _, _ = driver.execute_query(
        "MATCH (e:Entity {ns: $ns}) RETURN e.entity_id AS id, e.norm AS norm, e.embedding AS v, "
        "e.embedding_model AS model", ns=ns)
    return {r["norm"]: (r["id"], None if r["v"] is None else tuple(decode_vectors([r["v"]])[0].tolist()),
                        r["model"]) for r in records}


def synonym_edges(driver, ns: str) -> dict[tuple[str, str], float]:
    records, _, _ = driver.execute_query(
        "MATCH (a:Entity {ns: $ns})-[s:SYNONYM]->(b:Entity) RETURN a.norm AS a, b.norm AS b, "
        "a.entity_id < b.entity_id AS ordered, s.score AS score", ns=ns)
    assert all(r["ordered"] for r in records)  # one direction per pair: smaller id -> larger
    return {(r["a"], r["b"]): r["score"] for r in records}


def test_synonyms_for_new_entities_only_and_gone_with_their_entity(store, embedder, neo4j_driver, namespace):
    extractor = EntityExtractor(load_nlp())
    results, analysts = (make_chunks(doc, texts) for doc, texts in BANK_TEXTS.items())
    first = sync_graph(store, extractor, STRATEGY, results, embedder=embedder)
    before = embeddings(neo4j_driver, namespace)
    assert first.entities_embedded == len(before) >= 2 and first.synonym_edges == 0
    for _, vector, model in before.values():
        assert model == embedder.model_id and len(vector) == embedder.dimension
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-4)

    second = sync_graph(store, extractor, STRATEGY, results + analysts, embedder=embedder)
    after = embeddings(neo4j_driver, namespace)
    assert second.entities_embedded == len(after) - len(before) == 2  # "Deutsche Bank" and "London" only
    assert all(after[name] == before[name] for name in before)  # the old ones were not embedded again
    edges = synonym_edges(neo4j_driver, namespace)
    pair = tuple(sorted(("deutsche bank ag", "deutsche bank"), key=lambda n: after[n][0]))
    assert set(edges) == {pair} and second.synonym_edges == 1
    assert edges[pair] == pytest.approx(float(np.dot(after[pair[0]][1], after[pair[1]][1])), abs=1e-4)
    assert edges[pair] >= SynonymParams().threshold
    ids, vectors = store.retrieval_name_vectors(embedder.model_id)  # what graph_rag's name matching loads
    stored = {entity_id: vector for entity_id, vector, _ in after.values()}
    assert sorted(ids) == sorted(stored) and vectors.dtype == np.float32
    assert all(np.allclose(row, stored[i]) for i, row in zip(ids, vectors, strict=True))
    assert second.version == store.graph_version(STRATEGY) != first.version

    unchanged = sync_graph(store, extractor, STRATEGY, results + analysts, embedder=embedder)
    assert not unchanged.changed and store.graph_version(STRATEGY) == second.version

    # An interrupted run: edges written, the embedding not. The next sync, with no chunk to extract, redoes it.
    neo4j_driver.execute_query("MATCH (e:Entity {ns: $ns, norm: 'deutsche bank'}) REMOVE e.embedding_model",
                               ns=namespace)
    healed = sync_graph(store, extractor, STRATEGY, results + analysts, embedder=embedder)
    assert healed.entities_embedded == 1 and healed.chunks_added == 0 and healed.synonym_edges == 1
    # Dropped and written again, not doubled (int8 quantization scales by batch: the vector moves a little).
    assert synonym_edges(neo4j_driver, namespace) == pytest.approx(edges, abs=0.01)
    assert healed.version == store.graph_version(STRATEGY) != second.version

    # Deleting the document deletes its own entities and, with them, their synonym edges.
    gone = sync_graph(store, extractor, STRATEGY, results, embedder=embedder)
    assert gone.entities_deleted == 2 and synonym_edges(neo4j_driver, namespace) == {}
    assert embeddings(neo4j_driver, namespace) == before
    assert gone.version == store.graph_version(STRATEGY) != healed.version


def test_synonym_settings_apply_and_a_change_links_every_entity_again(store, embedder, neo4j_driver, namespace):
    extractor = EntityExtractor(load_nlp())
    chunks = [c for doc, texts in BANK_TEXTS.items() for c in make_chunks(doc, texts)]
    strict = sync_graph(store, extractor, STRATEGY, chunks, embedder=embedder, synonyms=SynonymParams(threshold=0.99))
    assert strict.entities_embedded == 4 and strict.synonym_edges == 0 == len(synonym_edges(neo4j_driver, namespace))

    default = sync_graph(store, extractor, STRATEGY, chunks, embedder=embedder, synonyms=SynonymParams())
    assert default.chunks_added == 0 and default.entities_embedded == 4  # new settings: every entity again
    assert set(synonym_edges(neo4j_driver, namespace)) == {
        tuple(sorted(("deutsche bank ag", "deutsche bank"), key=lambda n: embeddings(neo4j_driver, namespace)[n][0]))}
    assert default.version == store.graph_version(STRATEGY) != strict.version

    loose = sync_graph(store, extractor, STRATEGY, chunks, embedder=embedder,
                       synonyms=SynonymParams(threshold=0.1, neighbours=1))
    edges = synonym_edges(neo4j_driver, namespace)
    # Each entity links its one nearest neighbour of its kind above 0.1 ("Deutsche Bank AG" and "Deutsche Bank"
    # each other's): 2 to 3 distinct pairs among 4 entities, and the old edge set was replaced.
    assert 2 <= len(edges) == loose.synonym_edges <= 3
    assert sync_graph(store, extractor, STRATEGY, chunks, embedder=embedder,
                      synonyms=SynonymParams(threshold=0.1, neighbours=1)).entities_embedded == 0


def test_entity_names_come_from_the_embedding_cache_once_embedded(store, embedder, neo4j_driver, namespace,
                                                                   tmp_path):
    from ragloom.stores.embedding_cache import EmbeddingCache

    embedded: list[str] = []

    class Counting(type(embedder)):  # the real model; records what reaches it
        def __init__(self) -> None:
            self.__dict__.update(embedder.__dict__)

        def encode(self, texts):
            embedded.extend(texts)
            return embedder.encode(texts)

    extractor = EntityExtractor(load_nlp())
    chunks = [c for doc, texts in BANK_TEXTS.items() for c in make_chunks(doc, texts)]
    cache = EmbeddingCache(tmp_path / "cache")
    first = sync_graph(store, extractor, STRATEGY, chunks, embedder=Counting(), cache=cache)
    names = {name: vector for name, (_, vector, _) in embeddings(neo4j_driver, namespace).items()}
    assert first.entities_embedded == len(names) == 4 and first.names_cached == 0
    assert sorted(embedded) == sorted(set(embedded)) and len(embedded) == 4  # each distinct name once
    edges = synonym_edges(neo4j_driver, namespace)

    store.clear()
    embedded.clear()
    # A fresh graph (and a new cache object on the same folder: the cache is persisted) embeds nothing.
    again = sync_graph(store, extractor, STRATEGY, chunks, embedder=Counting(),
                       cache=EmbeddingCache(tmp_path / "cache"))
    assert embedded == [] and again.entities_embedded == again.names_cached == 4
    assert synonym_edges(neo4j_driver, namespace) == edges
    assert {name: vector for name, (_, vector, _) in embeddings(neo4j_driver, namespace).items()} == names


def test_name_vectors_of_another_backend_of_the_model_serve_the_query_side(store, embedder, neo4j_driver, namespace):
    chunks = [c for doc, texts in BANK_TEXTS.items() for c in make_chunks(doc, texts)]
    sync_graph(store, EntityExtractor(load_nlp()), STRATEGY, chunks, embedder=embedder)
    ids, _ = store.retrieval_name_vectors(embedder.model_id)
    assert len(ids) == 4

    def relabel(model: str) -> None:
        neo4j_driver.execute_query("MATCH (e:Entity {ns: $ns}) SET e.embedding_model = $model", ns=namespace,
                                   model=model)

    relabel("all-MiniLM-L6-v2|torch|384|fp16")  # as a GPU ingest stores them
    assert sorted(store.retrieval_name_vectors(embedder.model_id)[0]) == sorted(ids)
    relabel("another-model|torch|384")
    assert store.retrieval_name_vectors(embedder.model_id)[0] == []


def test_names_embedded_beside_the_extraction_workers_link_exactly_as_on_all_threads(store, neo4j_store_factory,
                                                                                   embedder, neo4j_driver,
                                                                                   namespace, monkeypatch):
    """With worker processes the linker embeds names on one thread (less CPU on busy cores); the vectors
    and SYNONYM edges are those of the embedder's own threads, bit for bit."""
    from ragloom.indexing.synonyms import SynonymLinker

    chunks = musique_chunks(60)
    waving = EntityExtractor(load_nlp(), n_process=2, batch_size=8, parallel_min_chunks=16, min_wave_chunks=20)
    params = SynonymParams(threshold=0.7)
    shared = sync_graph(store, waving, STRATEGY, chunks, embedder=embedder, synonyms=params)
    assert shared.extraction_processes == 2 and shared.waves == 3

    sharing: list[bool] = []
    monkeypatch.setattr(SynonymLinker, "share_cores", lambda self: sharing.append(True))
    reference = neo4j_store_factory(namespace + "_all_threads")
    own = sync_graph(reference, waving, STRATEGY, chunks, embedder=embedder, synonyms=params)
    assert sharing == [True] and own.entities_embedded == shared.entities_embedded > 0
    edges = synonym_edges(neo4j_driver, namespace)
    assert len(edges) == shared.synonym_edges > 0
    assert edges == synonym_edges(neo4j_driver, reference.namespace)
    assert embeddings(neo4j_driver, namespace) == embeddings(neo4j_driver, reference.namespace)

    # Extraction in this process (a small sync): the cores are the linker's, it keeps the embedder's threads.
    small = neo4j_store_factory(namespace + "_small")
    assert sync_graph(small, waving, STRATEGY, chunks[:5], embedder=embedder, synonyms=params).waves == 1
    assert sharing == [True]
