"""Neo4jStore against the real Neo4j: schema, writes, one-pass deletion, lookups, walks, checks, injection."""

from __future__ import annotations

import dataclasses

import pytest

from ragloom.errors import StoreError
from ragloom.extraction.extractor import COOCCURS, Extraction
from ragloom.retrieval.graph_index import build_graph
from ragloom.settings import Settings
from ragloom.stores.neo4j import Neo4jStore
from ragloom.types import Chunk, Entity, Mention, Relation, Scope

HOSTILE_NAMES = [
    'x"}) DETACH DELETE n //',
    "x'}) MATCH (n) DETACH DELETE n //",
    "back\\slash \\' \\\" end\\",
    "MATCH (n) DETACH DELETE n",
    "} RETURN 1 UNION MATCH (m) DELETE m {",
    "`backticks` $ns $rows",
]


@pytest.fixture
def store(neo4j_store_factory, namespace) -> Neo4jStore:
    s = neo4j_store_factory(namespace)
    s.ensure_schema()
    return s


def chunk(cid: str, doc: str, position: int, *, strategy: str = "recursive", level: int = 0,
          parent: str | None = None, scope: Scope | None = None) -> Chunk:
    text = f"text of {cid}"
    return Chunk(chunk_id=cid, document_id=doc, strategy=strategy, text=text, start=position * 100,
                 end=position * 100 + len(text), token_count=3, position=position, level=level, parent_id=parent,
                 scope=scope or Scope())


def entity(eid: str, name: str, etype: str = "ORG", aliases: tuple[str, ...] = ()) -> Entity:
    return Entity(entity_id=eid, name=name, type=etype, aliases=aliases)


def extraction(entities, mentions, relations, keys=None) -> Extraction:
    keys = keys or {e.entity_id: (e.name.lower(),) for e in entities}
    return Extraction(entities=list(entities), mentions=list(mentions), relations=list(relations), keys=keys)


def _relations(driver, ns: str) -> dict[tuple[str, str, str], dict]:
    records, _, _ = driver.execute_query(
        "MATCH (a:Entity {ns: $ns})-[r:RELATED_TO]->(b:Entity) RETURN a.entity_id AS source, b.entity_id AS target, "
        "r.type AS type, r.weight AS weight, r.chunk_ids AS chunk_ids, r.chunk_weights AS chunk_weights", ns=ns)
    return {(r["source"], r["target"], r["type"]): dict(r) for r in records}


def _next_chain(driver, ns: str, doc: str) -> list[tuple[str, str]]:
    records, _, _ = driver.execute_query(
        "MATCH (a:Chunk {ns: $ns, document_id: $doc})-[:NEXT]->(b:Chunk) RETURN a.chunk_id AS source, "
        "b.chunk_id AS target ORDER BY a.level, a.position", ns=ns, doc=doc)
    return [(r["source"], r["target"]) for r in records]


@pytest.fixture
def small_graph(store):
    """Two documents; entity s is shared by both, a only in c1, b in c1 and c2, z only in d2's chunk."""
    chunks = [chunk("c1", "d1", 0), chunk("c2", "d1", 1), chunk("c3", "d2", 0)]
    store.upsert_chunks(chunks)
    store.relink_next(chunks)
    ents = [entity("a", "Alpha Corp"), entity("b", "Beta Inc", aliases=("Beta",)), entity("s", "Shared Org"),
            entity("z", "Zeta", "PERSON")]
    mentions = [Mention("c1", "a", 2), Mention("c1", "b", 1), Mention("c1", "s", 1), Mention("c2", "b", 1),
                Mention("c2", "s", 3), Mention("c3", "s", 1), Mention("c3", "z", 1)]
    rels = [Relation("a", "b", COOCCURS, "c1", 2), Relation("b", "s", COOCCURS, "c1", 1),
            Relation("b", "s", COOCCURS, "c2", 4), Relation("a", "s", "ACQUIRE", "c1", 1),
            Relation("s", "z", COOCCURS, "c3", 1)]
    keys = {"a": ("alpha corp",), "b": ("beta inc", "beta"), "s": ("shared org",), "z": ("zeta",)}
    store.write_extraction(extraction(ents, mentions, rels, keys), [c.chunk_id for c in chunks])
    return store


def test_schema_is_created_once_and_idempotent(store, neo4j_driver):
    store._schema_ready = False
    store.ensure_schema()  # a second time: IF NOT EXISTS everywhere
    records, _, _ = neo4j_driver.execute_query("SHOW CONSTRAINTS YIELD name, properties RETURN name, properties")
    constraints = {r["name"]: r["properties"] for r in records}
    assert constraints["ragloom_chunk_key"] == ["ns", "chunk_id"]
    assert constraints["ragloom_entity_key"] == ["ns", "entity_id"]
    records, _, _ = neo4j_driver.execute_query("SHOW RANGE INDEXES YIELD name, properties, state")
    indexes = {r["name"]: r for r in records}
    assert indexes["ragloom_entity_norm"]["properties"] == ["ns", "norm"]
    assert indexes["ragloom_entity_norm"]["state"] == "ONLINE"


def test_chunks_documents_next_and_parents(store, neo4j_driver, namespace):
    chunks = [chunk("p0", "d1", 0, strategy="hierarchical", level=0),
              chunk("k1", "d1", 1, strategy="hierarchical", level=1, parent="p0"),
              chunk("k0", "d1", 0, strategy="hierarchical", level=1, parent="p0"),
              chunk("r1", "d1", 1), chunk("r0", "d1", 0)]
    store.upsert_chunks(chunks)
    assert store.relink_next(chunks) == 2
    assert set(_next_chain(neo4j_driver, namespace, "d1")) == {("k0", "k1"), ("r0", "r1")}
    records, _, _ = neo4j_driver.execute_query(
        "MATCH (p:Chunk {ns: $ns})-[:PARENT_OF]->(c) RETURN p.chunk_id AS parent, c.chunk_id AS child ORDER BY child",
        ns=namespace)
    assert [(r["parent"], r["child"]) for r in records] == [("p0", "k0"), ("p0", "k1")]
    records, _, _ = neo4j_driver.execute_query(
        "MATCH (d:Document {ns: $ns})-[:HAS_CHUNK]->(c) RETURN d.document_id AS doc, count(c) AS n", ns=namespace)
    assert [(r["doc"], r["n"]) for r in records] == [("d1", 5)]
    assert store.chunk_ids() == {"p0", "k0", "k1", "r0", "r1"}
    assert store.chunk_ids("recursive") == {"r0", "r1"}
    assert store.chunk_states("recursive") == {"r0": ("d1", False), "r1": ("d1", False)}


def test_write_extraction_counts_and_evidence(small_graph, neo4j_driver, namespace):
    stats = small_graph.stats()
    assert {k: stats[k] for k in ("documents", "chunks", "entities", "mentions", "relations")} == \
        {"documents": 2, "chunks": 3, "entities": 4, "mentions": 7, "relations": 4}
    assert stats["cooccurrence_relations"] == 3
    assert stats["top_entities"][0]["name"] == "Shared Org" and stats["top_entities"][0]["degree"] == 3
    assert sorted(stats["degrees"], reverse=True) == [3, 2, 2, 1]
    rel = _relations(neo4j_driver, namespace)[("b", "s", COOCCURS)]
    assert rel["weight"] == 5 and rel["chunk_ids"] == ["c1", "c2"] and rel["chunk_weights"] == [1, 4]
    assert small_graph.chunk_states("recursive")["c1"] == ("d1", True)


def test_writes_are_idempotent(small_graph, neo4j_driver, namespace):
    before = (_relations(neo4j_driver, namespace), small_graph.stats())
    mentions = [Mention("c1", "a", 2)]
    rels = [Relation("b", "s", COOCCURS, "c2", 4)]
    small_graph.write_extraction(extraction([entity("a", "Alpha Corp"), entity("b", "Beta Inc"),
                                             entity("s", "Shared Org")], mentions, rels), ["c1", "c2"])
    small_graph.upsert_chunks([chunk("c1", "d1", 0)])
    assert (_relations(neo4j_driver, namespace), small_graph.stats()) == before


def test_known_entities_and_alias_merge(small_graph):
    known = {k.entity_id: k for k in small_graph.known_entities()}
    assert known["b"].keys == ("beta inc", "beta") and known["b"].type == "ORG"
    # A later batch names b differently: the stored name stays, the new one becomes an alias.
    small_graph.write_extraction(extraction([entity("b", "Beta Incorporated", aliases=("BETA",))], [], [],
                                            {"b": ("beta inc", "beta incorporated")}), [])
    row = small_graph.entities_by_names(["beta incorporated"])
    assert [(r["entity_id"], r["name"]) for r in row] == [("b", "Beta Inc")]


def test_delete_chunks_withdraws_evidence_in_one_pass(small_graph, neo4j_driver, namespace):
    counts = small_graph.delete_chunks(["c1", "c3", "not-there"])
    assert counts["chunks"] == 2
    rels = _relations(neo4j_driver, namespace)
    # b-s lost c1's evidence but keeps c2's; a-b, a-s (only c1) and s-z (only c3) are gone.
    assert set(rels) == {("b", "s", COOCCURS)}
    assert rels[("b", "s", COOCCURS)]["weight"] == 4 and rels[("b", "s", COOCCURS)]["chunk_ids"] == ["c2"]
    assert counts["relations_deleted"] == 3 and counts["relations_updated"] == 4
    # a and z lost their only chunk; b and the shared entity stay. d2 has no chunks left.
    assert {k.entity_id for k in small_graph.known_entities()} == {"b", "s"}
    assert counts["entities_deleted"] == 2 and counts["documents_deleted"] == 1
    assert small_graph.stats()["documents"] == 1
    assert small_graph.dangling_mentions() == 0
    assert small_graph.delete_chunks(["c1"])["chunks"] == 0  # again: nothing left to do


def test_lookups_are_scoped_to_the_namespace(small_graph, neo4j_store_factory, namespace):
    other = neo4j_store_factory(namespace + "_other")
    other.write_extraction(extraction([entity("b", "Beta Inc")], [], []), [])
    assert [h["entity_id"] for h in small_graph.entities_by_names(["beta inc"])] == ["b"]
    assert len(other.entities_by_names(["beta inc"])) == 1
    assert other.stats()["entities"] == 1 and small_graph.stats()["entities"] == 4


def test_entities_by_names_matches_normalized_names_and_aliases(small_graph):
    rows = small_graph.entities_by_names(["beta", "shared org", "nobody"])
    assert {r["entity_id"] for r in rows} == {"b", "s"}
    assert rows[0]["entity_id"] == "s"  # most mentioned first
    assert small_graph.entities_by_names([]) == []
    assert small_graph.entities_by_names(["Beta"]) == []  # names are normalized keys: callers normalize


def test_check_helpers_detect_bad_data(small_graph, neo4j_driver, namespace):
    assert small_graph.empty_entity_names() == 0 and small_graph.dangling_mentions() == 0
    assert small_graph.chunk_ids("recursive") == {"c1", "c2", "c3"}
    neo4j_driver.execute_query("CREATE (:Entity {ns: $ns, entity_id: 'blank', name: '  '})", ns=namespace)
    neo4j_driver.execute_query("MATCH (e:Entity {ns: $ns, entity_id: 'a'}) CREATE (:Stray {ns: $ns})-[:MENTIONS]->(e)",
                               ns=namespace)
    try:
        assert small_graph.empty_entity_names() == 1
        assert small_graph.dangling_mentions() == 1
    finally:
        neo4j_driver.execute_query("MATCH (s:Stray {ns: $ns}) DETACH DELETE s", ns=namespace)


def test_hostile_values_are_stored_verbatim_and_delete_nothing(store, neo4j_store_factory, neo4j_driver, namespace):
    sentinel = neo4j_store_factory(namespace + "_sentinel")
    hostile_ns = neo4j_store_factory(namespace + HOSTILE_NAMES[0])
    sentinel.upsert_chunks([chunk("keep", "keep-doc", 0)])
    sentinel.write_extraction(extraction([entity("k", "Keep Me")], [Mention("keep", "k", 1)], []), ["keep"])
    before = sentinel.stats()
    for target in (store, hostile_ns):
        cid, doc = HOSTILE_NAMES[1], HOSTILE_NAMES[2]
        target.upsert_chunks([Chunk(chunk_id=cid, document_id=doc, strategy="recursive", text="t", start=0, end=1,
                                    token_count=1, position=0, heading_path=HOSTILE_NAMES)])
        ents = [entity(f"h{i}", name, HOSTILE_NAMES[3], aliases=(HOSTILE_NAMES[4],))
                for i, name in enumerate(HOSTILE_NAMES)]
        rels = [Relation("h0", "h1", HOSTILE_NAMES[5], cid, 1)]
        target.write_extraction(extraction(ents, [Mention(cid, e.entity_id, 1) for e in ents], rels,
                                           {e.entity_id: (e.name,) for e in ents}), [cid])
        records, _, _ = neo4j_driver.execute_query(
            "MATCH (e:Entity) WHERE e.ns = $ns RETURN e.name AS name, e.type AS type, e.aliases AS aliases",
            ns=target.namespace)
        assert sorted(r["name"] for r in records) == sorted(HOSTILE_NAMES)
        assert {r["type"] for r in records} == {HOSTILE_NAMES[3]}
        assert all(r["aliases"] == ([] if r["name"] == HOSTILE_NAMES[4] else [HOSTILE_NAMES[4]]) for r in records)
        assert target.chunk_ids() == {cid}
        assert target.entities_by_names(HOSTILE_NAMES, limit=100)
        rows = target.retrieval_graph_rows("recursive")  # the snapshot graph_rag walks: values verbatim
        assert sorted(rows["entities"]["name"]) == sorted(HOSTILE_NAMES)
        relations = rows["relations"]
        assert ("h0", "h1", HOSTILE_NAMES[5], [cid]) in zip(relations["source"], relations["target"], relations["type"],
                                                            relations["chunk_ids"], strict=True)
        assert rows["chunks"]["chunk_id"] == [cid] and rows["chunks"]["scope_path"] == ["__shared__"]
        assert target.stats()["entities"] == len(HOSTILE_NAMES)
        target.delete_chunks([cid, *HOSTILE_NAMES])
        assert target.stats()["entities"] == 0
    assert sentinel.stats() == before
    assert store.chunk_ids() == set()


def test_connect_errors_are_store_errors(settings):
    bad_password = dataclasses.replace(settings, neo4j_password="definitely-not-the-password")
    with pytest.raises(StoreError, match="refused"):
        Neo4jStore.connect(bad_password)
    nobody_listens = dataclasses.replace(settings, neo4j_uri="bolt://127.0.0.1:1")
    with pytest.raises(StoreError, match="unreachable"):
        Neo4jStore.connect(nobody_listens)


def test_connect_uses_settings_namespace(settings: Settings, namespace):
    with Neo4jStore.connect(dataclasses.replace(settings, graph_namespace=namespace)) as s:
        assert s.namespace == namespace
        assert s.chunk_ids() == set()


def _types(driver, ns: str) -> dict[str, tuple[str, dict[str, int]]]:
    records, _, _ = driver.execute_query(
        "MATCH (e:Entity {ns: $ns}) RETURN e.entity_id AS id, e.type AS type, e.type_labels AS labels, "
        "e.type_votes AS votes", ns=ns)
    return {r["id"]: (r["type"], dict(zip(r["labels"] or [], r["votes"] or [], strict=True))) for r in records}


def test_the_type_follows_the_vote_of_every_mention_and_moves_back_when_chunks_go(store, neo4j_driver, namespace):
    """Votes hand-tallied: the first batch calls Amara a PERSON twice; three later chunks call her an ORG once
    each (the sample corpus's error); removing them withdraws their votes, and a tie keeps the stored type."""
    chunks = [chunk(f"c{i}", "d1", i) for i in range(1, 5)]
    store.upsert_chunks(chunks)
    amara = entity("amara", "Amara Lindqvist", "PERSON")
    store.write_extraction(extraction([amara], [Mention("c1", "amara", 2, (("PERSON", 2),))], []), ["c1"])
    assert _types(neo4j_driver, namespace)["amara"] == ("PERSON", {"PERSON": 2})
    # A later batch resolves onto the stored entity (its label offered is the stored one) with ORG votes.
    later = [Mention(f"c{i}", "amara", 1, (("ORG", 1),)) for i in (2, 3)]
    store.write_extraction(extraction([amara], later, []), ["c2", "c3"])
    assert _types(neo4j_driver, namespace)["amara"] == ("PERSON", {"ORG": 2, "PERSON": 2})  # a tie holds
    store.write_extraction(extraction([amara], [Mention("c4", "amara", 1, (("ORG", 1),))], []), ["c4"])
    assert _types(neo4j_driver, namespace)["amara"] == ("ORG", {"ORG": 3, "PERSON": 2})
    assert store.known_entities()[0].type == "ORG"  # what the next batch resolves onto
    # Writing the same chunk again changes no tally (idempotent re-run of a half-written wave).
    store.write_extraction(extraction([amara], [Mention("c4", "amara", 1, (("ORG", 1),))], []), ["c4"])
    assert _types(neo4j_driver, namespace)["amara"] == ("ORG", {"ORG": 3, "PERSON": 2})
    store.delete_chunks(["c4"])
    assert _types(neo4j_driver, namespace)["amara"] == ("ORG", {"ORG": 2, "PERSON": 2})  # a tie holds again
    store.delete_chunks(["c3"])
    assert _types(neo4j_driver, namespace)["amara"] == ("PERSON", {"ORG": 1, "PERSON": 2})
    # What retrieval reads (the graph snapshot, lookups by name) is the voted type.
    assert [e["type"] for e in store.entities_by_names(["amara lindqvist"])] == ["PERSON"]
    snapshot = build_graph(store.retrieval_graph_rows("recursive"))  # graph_rag's context item and the service
    assert snapshot.entity_types[snapshot.entity_names.index("Amara Lindqvist")] == "PERSON"


def _cue_tallies(driver, ns: str) -> dict[str, dict[str, int]]:
    records, _, _ = driver.execute_query(
        "MATCH (e:Entity {ns: $ns}) RETURN e.entity_id AS id, e.type_cues AS cues, e.type_cue_counts AS counts", ns=ns)
    return {r["id"]: dict(zip(r["cues"] or [], r["counts"] or [], strict=True)) for r in records}


def test_a_type_cue_outranks_the_labels_while_its_chunk_is_there(store, neo4j_driver, namespace):
    """Hand-tallied: Sofia is an ORG in the model's every label (the sample corpus's error); the one chunk whose
    e-mail address spells her name makes her a PERSON, a re-write changes nothing, and removing that chunk hands the
    type back to the labels. Her id never changes."""
    chunks = [chunk(f"c{i}", "d1", i) for i in range(1, 4)]
    store.upsert_chunks(chunks)
    sofia = entity("sofia", "Sofia Almeida", "ORG")
    labelled = [Mention(f"c{i}", "sofia", 2, (("ORG", 2),)) for i in (1, 2)]
    store.write_extraction(extraction([sofia], labelled, []), ["c1", "c2"])
    assert _types(neo4j_driver, namespace)["sofia"] == ("ORG", {"ORG": 4})
    assert _cue_tallies(neo4j_driver, namespace)["sofia"] == {}
    cued = Mention("c3", "sofia", 1, (("ORG", 1),), (("email_name", 1),))
    moved = {}
    for _ in range(2):  # the second write: an idempotent re-run of the same wave
        store.write_extraction(extraction([sofia], [cued], []), ["c3"])
        assert _types(neo4j_driver, namespace)["sofia"] == ("PERSON", {"ORG": 5})
        assert _cue_tallies(neo4j_driver, namespace)["sofia"] == {"email_name": 1}
        moved = store.update_entity_counts(["sofia"])
    assert moved == {}  # the type holds while the evidence does: nothing to move on a recount
    assert [e.entity_id for e in store.known_entities()] == ["sofia"]
    snapshot = build_graph(store.retrieval_graph_rows("recursive"))
    assert snapshot.entity_types[snapshot.entity_names.index("Sofia Almeida")] == "PERSON"
    store.delete_chunks(["c3"])
    assert _types(neo4j_driver, namespace)["sofia"] == ("ORG", {"ORG": 4})
    assert _cue_tallies(neo4j_driver, namespace)["sofia"] == {}


def test_cues_of_two_kinds_tied_leave_the_type_to_the_labels(store, neo4j_driver, namespace):
    chunks = [chunk(f"c{i}", "d1", i) for i in range(1, 3)]
    store.upsert_chunks(chunks)
    name = entity("n", "Jordan", "GPE")
    mentions = [Mention("c1", "n", 1, (("GPE", 1),), (("place_phrase", 1),)),
                Mention("c2", "n", 2, (("PERSON", 2),), (("honorific", 1),))]
    store.write_extraction(extraction([name], mentions, []), ["c1", "c2"])
    # PERSON 2 to GPE 1 by the labels; one cue each for a person and a place: the labels decide
    assert _types(neo4j_driver, namespace)["n"] == ("PERSON", {"GPE": 1, "PERSON": 2})
    assert _cue_tallies(neo4j_driver, namespace)["n"] == {"honorific": 1, "place_phrase": 1}
    store.delete_chunks(["c2"])  # the place cue alone leads now
    assert _types(neo4j_driver, namespace)["n"] == ("GPE", {"GPE": 1})
