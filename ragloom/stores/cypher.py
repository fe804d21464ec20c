"""Every Cypher statement ragloom runs, as constants and pure builders returning (query, params).

Data only ever travels as parameters; no value is formatted into query text. Every statement is scoped
to one graph namespace (`$ns`): Neo4j Community has a single database, so each pipeline's (and each
test's) graph is isolated by an `ns` property on every node, in every key and every filter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragloom.types import COOCCURS

Query = tuple[str, dict[str, Any]]

# Uniqueness is per namespace: composite keys (ns, id). Community 5.26 accepts these.
SCHEMA: tuple[str, ...] = (
    "CREATE CONSTRAINT ragloom_document_key IF NOT EXISTS FOR (d:Document) REQUIRE (d.ns, d.document_id) IS UNIQUE",
    "CREATE CONSTRAINT ragloom_chunk_key IF NOT EXISTS FOR (c:Chunk) REQUIRE (c.ns, c.chunk_id) IS UNIQUE",
    "CREATE CONSTRAINT ragloom_entity_key IF NOT EXISTS FOR (e:Entity) REQUIRE (e.ns, e.entity_id) IS UNIQUE",
    "CREATE CONSTRAINT ragloom_graph_meta_key IF NOT EXISTS FOR (m:GraphMeta) REQUIRE (m.ns, m.strategy) IS UNIQUE",
    "CREATE INDEX ragloom_chunk_strategy IF NOT EXISTS FOR (c:Chunk) ON (c.ns, c.strategy)",
    "CREATE INDEX ragloom_chunk_document IF NOT EXISTS FOR (c:Chunk) ON (c.ns, c.document_id)",
    "CREATE INDEX ragloom_entity_norm IF NOT EXISTS FOR (e:Entity) ON (e.ns, e.norm)",
)
AWAIT_INDEXES = "CALL db.awaitIndexes($seconds)"

# --- writes (UNWIND over $rows; MERGE so a re-run changes nothing) ------------------------------------

UPSERT_CHUNKS = """
UNWIND $rows AS row
MERGE (d:Document {ns: $ns, document_id: row.document_id})
MERGE (c:Chunk {ns: $ns, chunk_id: row.chunk_id})
ON CREATE SET c.extracted = false
SET c.document_id = row.document_id, c.strategy = row.strategy, c.level = row.level,
    c.position = row.position, c.scope_path = row.scope_path, c.parent_id = row.parent_id,
    c.start = row.start, c.end = row.end, c.heading_path = row.heading_path
MERGE (d)-[:HAS_CHUNK]->(c)
"""

LINK_PARENTS = """
UNWIND $rows AS row
MATCH (p:Chunk {ns: $ns, chunk_id: row.parent_id})
MATCH (c:Chunk {ns: $ns, chunk_id: row.chunk_id})
MERGE (p)-[:PARENT_OF]->(c)
"""

UNLINK_NEXT = """
UNWIND $rows AS row
MATCH (c:Chunk {ns: $ns, document_id: row.document_id})-[r:NEXT]->()
WHERE c.strategy = row.strategy
DELETE r
"""

LINK_NEXT = """
UNWIND $rows AS row
MATCH (a:Chunk {ns: $ns, chunk_id: row.source})
MATCH (b:Chunk {ns: $ns, chunk_id: row.target})
MERGE (a)-[:NEXT]->(b)
"""

# The stored name wins; other names this batch saw become aliases (the fulltext index covers both).
UPSERT_ENTITIES = """
UNWIND $rows AS row
MERGE (e:Entity {ns: $ns, entity_id: row.entity_id})
ON CREATE SET e.name = row.name, e.type = row.type, e.norm = row.norm, e.aliases = [], e.alias_norms = []
WITH e, row
SET e.aliases = e.aliases + [a IN row.aliases WHERE a <> e.name AND NOT a IN e.aliases],
    e.alias_norms = e.alias_norms + [k IN row.alias_norms WHERE k <> e.norm AND NOT k IN e.alias_norms]
"""

WRITE_MENTIONS = """
UNWIND $rows AS row
MATCH (c:Chunk {ns: $ns, chunk_id: row.chunk_id})
MATCH (e:Entity {ns: $ns, entity_id: row.entity_id})
MERGE (c)-[m:MENTIONS]->(e)
SET m.count = row.count, m.labels = row.labels, m.label_counts = row.label_counts, m.cues = row.cues,
    m.cue_counts = row.cue_counts
"""

# Evidence is a list of chunk ids with a parallel list of per-chunk weights, so withdrawing a chunk
# subtracts exactly what it added. A chunk already in the list is not counted twice.
WRITE_RELATIONS = """
UNWIND $rows AS row
MATCH (a:Entity {ns: $ns, entity_id: row.source})
MATCH (b:Entity {ns: $ns, entity_id: row.target})
MERGE (a)-[r:RELATED_TO {type: row.type}]->(b)
ON CREATE SET r.chunk_ids = [], r.chunk_weights = [], r.weight = 0
WITH r, row, [i IN range(0, size(row.chunk_ids) - 1) WHERE NOT row.chunk_ids[i] IN r.chunk_ids] AS fresh
SET r.chunk_ids = r.chunk_ids + [i IN fresh | row.chunk_ids[i]],
    r.chunk_weights = r.chunk_weights + [i IN fresh | row.weights[i]],
    r.weight = r.weight + reduce(total = 0, i IN fresh | total + row.weights[i])
"""

# Recounted, not incremented: a re-run of a half-written wave or a deletion leaves the exact figures. Only
# chunks start MENTIONS, one per (chunk, entity) (MERGE), so the degree is the number of distinct chunks. The
# type votes (NER label -> spans) and the type cues (cue rule -> spans, ragloom.extraction.cues) are summed over
# those MENTIONS into parallel lists on the node; the rows returned are the entities whose stored type may have
# to move (it no longer has the most votes, or cues are there to decide), for the caller to retype
# (ragloom.extraction.resolution.voted_type decides; SET_TYPES writes).
UPDATE_ENTITY_COUNTS = """
UNWIND $entity_ids AS entity_id
MATCH (e:Entity {ns: $ns, entity_id: entity_id})
CALL (e) {
  MATCH (:Chunk)-[m:MENTIONS]->(e)
  UNWIND range(0, size(coalesce(m.labels, [])) - 1) AS i
  WITH m.labels[i] AS label, sum(m.label_counts[i]) AS votes
  ORDER BY label
  RETURN collect(label) AS labels, collect(votes) AS votes
}
CALL (e) {
  MATCH (:Chunk)-[m:MENTIONS]->(e)
  UNWIND range(0, size(coalesce(m.cues, [])) - 1) AS i
  WITH m.cues[i] AS cue, sum(m.cue_counts[i]) AS n
  ORDER BY cue
  RETURN collect(cue) AS cues, collect(n) AS cue_counts
}
SET e.chunk_count = COUNT { (e)<-[:MENTIONS]-() }, e.type_labels = labels, e.type_votes = votes,
    e.type_cues = cues, e.type_cue_counts = cue_counts
WITH e, labels, votes, cues, cue_counts,
     reduce(top = 0, v IN votes | CASE WHEN v > top THEN v ELSE top END) AS top
WHERE size(cues) > 0
   OR (top > 0 AND NOT e.type IN [i IN range(0, size(labels) - 1) WHERE votes[i] = top | labels[i]])
RETURN e.entity_id AS entity_id, e.type AS type, labels, votes, cues, cue_counts
"""

SET_TYPES = """
UNWIND $rows AS row
MATCH (e:Entity {ns: $ns, entity_id: row.entity_id})
SET e.type = row.type
"""

# Entity-name embeddings (float32 bytes, unit length), the embedder that made them and the synonym settings
# their SYNONYM edges were linked with: a change of either redoes the entity.
WRITE_ENTITY_EMBEDDINGS = """
UNWIND $rows AS row
MATCH (e:Entity {ns: $ns, entity_id: row.entity_id})
SET e.embedding = row.embedding, e.embedding_model = $model, e.synonym_params = $linked
"""

DROP_SYNONYMS = """
UNWIND $entity_ids AS entity_id
MATCH (:Entity {ns: $ns, entity_id: entity_id})-[s:SYNONYM]-(:Entity)
DELETE s
"""

WRITE_SYNONYMS = """
UNWIND $rows AS row
MATCH (a:Entity {ns: $ns, entity_id: row.source})
MATCH (b:Entity {ns: $ns, entity_id: row.target})
MERGE (a)-[s:SYNONYM]->(b)
SET s.score = row.score
"""

MARK_EXTRACTED = """
UNWIND $chunk_ids AS chunk_id
MATCH (c:Chunk {ns: $ns, chunk_id: chunk_id})
SET c.extracted = true
"""

# --- deletion: one pass over all removed chunks ------------------------------------------------------

# Relations with evidence in the removed chunks: every evidence chunk mentions both ends, so the
# relations to update hang off the entities those chunks mention.
WITHDRAW_EVIDENCE = """
UNWIND $chunk_ids AS chunk_id
MATCH (:Chunk {ns: $ns, chunk_id: chunk_id})-[:MENTIONS]->(e:Entity)
WITH DISTINCT e
MATCH (e)-[r:RELATED_TO]->(:Entity)
WITH DISTINCT r
WHERE any(x IN r.chunk_ids WHERE x IN $chunk_ids)
WITH r, [i IN range(0, size(r.chunk_ids) - 1) WHERE NOT r.chunk_ids[i] IN $chunk_ids] AS keep
WITH r, [i IN keep | r.chunk_ids[i]] AS ids, [i IN keep | r.chunk_weights[i]] AS weights
SET r.chunk_ids = ids, r.chunk_weights = weights, r.weight = reduce(total = 0, w IN weights | total + w)
WITH r, size(ids) = 0 AS unsupported
FOREACH (_ IN CASE WHEN unsupported THEN [1] ELSE [] END | DELETE r)
RETURN count(*) AS updated, count(CASE WHEN unsupported THEN 1 END) AS deleted
"""

REMOVAL_SCOPE = """
UNWIND $chunk_ids AS chunk_id
MATCH (c:Chunk {ns: $ns, chunk_id: chunk_id})
OPTIONAL MATCH (c)-[:MENTIONS]->(e:Entity)
RETURN collect(DISTINCT c.document_id) AS document_ids, collect(DISTINCT e.entity_id) AS entity_ids
"""

DELETE_CHUNKS = """
UNWIND $chunk_ids AS chunk_id
MATCH (c:Chunk {ns: $ns, chunk_id: chunk_id})
DETACH DELETE c
RETURN count(*) AS deleted
"""

DELETE_ORPHAN_ENTITIES = """
UNWIND $entity_ids AS entity_id
MATCH (e:Entity {ns: $ns, entity_id: entity_id})
WHERE NOT EXISTS { (:Chunk)-[:MENTIONS]->(e) }
DETACH DELETE e
RETURN count(*) AS deleted
"""

DELETE_EMPTY_DOCUMENTS = """
UNWIND $document_ids AS document_id
MATCH (d:Document {ns: $ns, document_id: document_id})
WHERE NOT EXISTS { (d)-[:HAS_CHUNK]->() }
DETACH DELETE d
RETURN count(*) AS deleted
"""

# The strategy's node is created, and every strategy's version in the namespace moves: entities, their
# relations and synonyms are shared by the strategies of one namespace.
STAMP_VERSION = """
MERGE (:GraphMeta {ns: $ns, strategy: $strategy})
WITH 1 AS one
MATCH (m:GraphMeta) WHERE m.ns = $ns
SET m.version = $version, m.updated_at = datetime()
RETURN count(m) AS stamped
"""

# A change that is no sync of one strategy (chunks moved to another scope) moves every existing version.
STAMP_VERSIONS = """
MATCH (m:GraphMeta) WHERE m.ns = $ns
SET m.version = $version, m.updated_at = datetime()
RETURN count(m) AS stamped
"""

CLEAR_LABEL = {
    "Chunk": "MATCH (n:Chunk) WHERE n.ns = $ns WITH n LIMIT $batch DETACH DELETE n RETURN count(*) AS deleted",
    "Entity": "MATCH (n:Entity) WHERE n.ns = $ns WITH n LIMIT $batch DETACH DELETE n RETURN count(*) AS deleted",
    "Document": "MATCH (n:Document) WHERE n.ns = $ns WITH n LIMIT $batch DETACH DELETE n RETURN count(*) AS deleted",
    "GraphMeta": "MATCH (n:GraphMeta) WHERE n.ns = $ns WITH n LIMIT $batch DETACH DELETE n RETURN count(*) AS deleted",
}

# --- reads --------------------------------------------------------------------------------------------

CHUNK_STATES = """
MATCH (c:Chunk) WHERE c.ns = $ns AND c.strategy = $strategy
RETURN c.chunk_id AS chunk_id, c.document_id AS document_id, coalesce(c.extracted, false) AS extracted
"""

CHUNK_IDS_ALL = "MATCH (c:Chunk) WHERE c.ns = $ns RETURN c.chunk_id AS chunk_id"
CHUNK_IDS_OF_STRATEGY = "MATCH (c:Chunk) WHERE c.ns = $ns AND c.strategy = $strategy RETURN c.chunk_id AS chunk_id"

GRAPH_VERSION = "MATCH (m:GraphMeta {ns: $ns, strategy: $strategy}) RETURN m.version AS version"

ENTITIES_TO_EMBED = """
UNWIND $entity_ids AS entity_id
MATCH (e:Entity {ns: $ns, entity_id: entity_id})
WHERE coalesce(e.embedding_model, '') <> $model OR coalesce(e.synonym_params, '') <> $linked
RETURN e.entity_id AS entity_id, e.name AS name, e.type AS type
"""

ALL_ENTITIES_TO_EMBED = """
MATCH (e:Entity)
WHERE e.ns = $ns AND (coalesce(e.embedding_model, '') <> $model OR coalesce(e.synonym_params, '') <> $linked)
RETURN e.entity_id AS entity_id, e.name AS name, e.type AS type
"""

ENTITY_EMBEDDINGS = """
MATCH (e:Entity) WHERE e.ns = $ns AND e.embedding_model = $model AND ($linked IS NULL OR e.synonym_params = $linked)
RETURN e.entity_id AS entity_id, e.name AS name, e.type AS type, e.embedding AS embedding
"""

SYNONYM_EDGES = """
MATCH (a:Entity)-[s:SYNONYM]->(b:Entity) WHERE a.ns = $ns
RETURN a.entity_id AS source_id, a.name AS source, b.entity_id AS target_id, b.name AS target, s.score AS score
ORDER BY score DESC, source_id, target_id
"""

ENTITY_KEYS = """
MATCH (e:Entity) WHERE e.ns = $ns
RETURN e.entity_id AS entity_id, e.type AS type, [e.norm] + coalesce(e.alias_norms, []) AS keys
"""

# Scope: with $scope_paths set, an entity is visible only when a chunk in one of those scopes mentions it.
ENTITIES_BY_NAMES = """
MATCH (e:Entity) WHERE e.ns = $ns AND (e.norm IN $names OR any(k IN e.alias_norms WHERE k IN $names))
  AND ($scope_paths IS NULL OR
       EXISTS { MATCH (vc:Chunk)-[:MENTIONS]->(e) WHERE vc.ns = $ns AND vc.scope_path IN $scope_paths })
RETURN e.entity_id AS entity_id, e.name AS name, e.type AS type, e.norm AS norm,
       COUNT { (:Chunk)-[:MENTIONS]->(e) } AS chunks
ORDER BY chunks DESC, e.entity_id
LIMIT $limit
"""

# --- the retrieval graph snapshot (ragloom.retrieval.graph_index) -----------------------------------

# One record of columns per query (lists, not a record per row): the driver decodes lists natively, while
# building a Python record per row cost ~3x the whole read (MuSiQue: 2.5 ms per chunk -> 0.5).
RETRIEVAL_CHUNKS = """
MATCH (c:Chunk) WHERE c.ns = $ns AND c.strategy = $strategy
OPTIONAL MATCH (c)-[m:MENTIONS]->(e:Entity)
WITH c, collect(e.entity_id) AS entity_ids, collect(m.count) AS counts
RETURN collect(c.chunk_id) AS chunk_id, collect(coalesce(c.scope_path, '')) AS scope_path,
       collect(entity_ids) AS entity_ids, collect(counts) AS counts
"""

RETRIEVAL_ENTITIES = """
MATCH (e:Entity) WHERE e.ns = $ns
RETURN collect(e.entity_id) AS entity_id, collect(coalesce(e.name, '')) AS name, collect(coalesce(e.type, '')) AS type,
       collect(coalesce(e.norm, '')) AS norm, collect(coalesce(e.alias_norms, [])) AS alias_norms
"""

RETRIEVAL_RELATIONS = """
MATCH (a:Entity)-[r:RELATED_TO]->(b:Entity) WHERE a.ns = $ns
RETURN collect(a.entity_id) AS source, collect(b.entity_id) AS target, collect(r.type) AS type,
       collect(coalesce(r.chunk_ids, [])) AS chunk_ids, collect(coalesce(r.chunk_weights, [])) AS chunk_weights
"""

RETRIEVAL_NAME_VECTORS = """
MATCH (e:Entity) WHERE e.ns = $ns AND e.embedding_model IN $models
RETURN collect(e.entity_id) AS entity_id, collect(e.embedding) AS embedding
"""

NAME_EMBEDDING_MODELS = """
MATCH (e:Entity) WHERE e.ns = $ns AND e.embedding_model IS NOT NULL
RETURN DISTINCT e.embedding_model AS model
"""

RETRIEVAL_SYNONYMS = """
MATCH (a:Entity)-[s:SYNONYM]->(b:Entity) WHERE a.ns = $ns
RETURN collect(a.entity_id) AS source, collect(b.entity_id) AS target, collect(s.score) AS score
"""

STATS = """
CALL () { MATCH (d:Document) WHERE d.ns = $ns RETURN count(d) AS documents }
CALL () { MATCH (c:Chunk) WHERE c.ns = $ns RETURN count(c) AS chunks }
CALL () { MATCH (e:Entity) WHERE e.ns = $ns RETURN count(e) AS entities }
CALL () { MATCH (c:Chunk)-[m:MENTIONS]->() WHERE c.ns = $ns RETURN count(m) AS mentions }
CALL () {
  MATCH (e:Entity)-[r:RELATED_TO]->() WHERE e.ns = $ns
  RETURN count(r) AS relations, count(CASE WHEN r.type = $cooccurs THEN 1 END) AS cooccurrence_relations
}
CALL () { MATCH (e:Entity)-[s:SYNONYM]->() WHERE e.ns = $ns RETURN count(s) AS synonyms }
RETURN documents, chunks, entities, mentions, relations, cooccurrence_relations, synonyms
"""

ENTITY_DEGREES = """
MATCH (e:Entity) WHERE e.ns = $ns
RETURN e.name AS name, e.type AS type, COUNT { (e)-[:RELATED_TO]-() } AS degree,
       COUNT { (:Chunk)-[:MENTIONS]->(e) } AS chunks
ORDER BY degree DESC, chunks DESC, name
"""

EMPTY_ENTITY_NAMES = """
MATCH (e:Entity) WHERE e.ns = $ns AND (e.name IS NULL OR trim(e.name) = '')
RETURN count(e) AS n
"""

# A MENTIONS must start at a Chunk of this namespace; anything else is dangling.
DANGLING_MENTIONS = """
MATCH (x)-[m:MENTIONS]->(e:Entity) WHERE e.ns = $ns AND (NOT x:Chunk OR x.ns IS NULL OR x.ns <> $ns)
RETURN count(m) AS n
"""


def batched(rows: list[Any], size: int) -> list[list[Any]]:
    return [rows[i: i + size] for i in range(0, len(rows), size)]


def _batch_builder(statement: str, param: str = "rows") -> Callable[[str, list[Any]], Query]:
    """The builder of a statement run over one batch of values (``$rows``, or ``$<param>``) in namespace ``ns``."""

    def build(ns: str, batch: list[Any]) -> Query:
        return statement, {"ns": ns, param: list(batch)}

    return build


# (ns, rows) -> Query: UNWIND $rows
upsert_chunks = _batch_builder(UPSERT_CHUNKS)
link_parents = _batch_builder(LINK_PARENTS)
unlink_next = _batch_builder(UNLINK_NEXT)
link_next = _batch_builder(LINK_NEXT)
upsert_entities = _batch_builder(UPSERT_ENTITIES)
write_mentions = _batch_builder(WRITE_MENTIONS)
write_relations = _batch_builder(WRITE_RELATIONS)
write_synonyms = _batch_builder(WRITE_SYNONYMS)
# (ns, ids) -> Query: one list of ids
update_entity_counts = _batch_builder(UPDATE_ENTITY_COUNTS, "entity_ids")
set_types = _batch_builder(SET_TYPES)
drop_synonyms = _batch_builder(DROP_SYNONYMS, "entity_ids")
mark_extracted = _batch_builder(MARK_EXTRACTED, "chunk_ids")
withdraw_evidence = _batch_builder(WITHDRAW_EVIDENCE, "chunk_ids")
removal_scope = _batch_builder(REMOVAL_SCOPE, "chunk_ids")
delete_chunks = _batch_builder(DELETE_CHUNKS, "chunk_ids")
delete_orphan_entities = _batch_builder(DELETE_ORPHAN_ENTITIES, "entity_ids")
delete_empty_documents = _batch_builder(DELETE_EMPTY_DOCUMENTS, "document_ids")


def stamp_version(ns: str, strategy: str | None, version: str) -> Query:
    """Every strategy's version in the namespace; with ``strategy``, its GraphMeta node is made if missing."""
    if strategy is None:
        return STAMP_VERSIONS, {"ns": ns, "version": version}
    return STAMP_VERSION, {"ns": ns, "strategy": strategy, "version": version}


def graph_version(ns: str, strategy: str) -> Query:
    return GRAPH_VERSION, {"ns": ns, "strategy": strategy}


def write_entity_embeddings(ns: str, rows: list[dict[str, Any]], model: str, linked: str) -> Query:
    return WRITE_ENTITY_EMBEDDINGS, {"ns": ns, "rows": rows, "model": model, "linked": linked}


def entities_to_embed(ns: str, model: str, linked: str, entity_ids: list[str] | None = None) -> Query:
    """Entities (among ``entity_ids``; None: all of the namespace) without an embedding from ``model`` or
    not linked with the synonym settings ``linked``."""
    if entity_ids is None:
        return ALL_ENTITIES_TO_EMBED, {"ns": ns, "model": model, "linked": linked}
    return ENTITIES_TO_EMBED, {"ns": ns, "model": model, "linked": linked, "entity_ids": list(entity_ids)}


def entity_embeddings(ns: str, model: str, linked: str | None = None) -> Query:
    """Entities embedded by ``model`` (and linked with ``linked``, when given)."""
    return ENTITY_EMBEDDINGS, {"ns": ns, "model": model, "linked": linked}


def synonym_edges(ns: str) -> Query:
    return SYNONYM_EDGES, {"ns": ns}


RESCOPE_DOCUMENT = """
MATCH (c:Chunk) WHERE c.ns = $ns AND c.document_id = $document_id AND c.scope_path IN $from_paths
SET c.scope_path = $scope_path
RETURN count(c) AS moved
"""


def rescope_document(ns: str, document_id: str, from_paths: list[str], scope_path: str) -> Query:
    """Move a document's chunks from any of ``from_paths`` to ``scope_path`` (scope promotion)."""
    return RESCOPE_DOCUMENT, {"ns": ns, "document_id": document_id, "from_paths": list(from_paths),
                              "scope_path": scope_path}


def clear_label(ns: str, label: str, batch: int = 10_000) -> Query:
    if label not in CLEAR_LABEL:
        raise ValueError(f"unknown label {label!r}; expected one of {sorted(CLEAR_LABEL)}")
    return CLEAR_LABEL[label], {"ns": ns, "batch": batch}


def chunk_states(ns: str, strategy: str) -> Query:
    return CHUNK_STATES, {"ns": ns, "strategy": strategy}


def chunk_ids(ns: str, strategy: str | None = None) -> Query:
    if strategy is None:
        return CHUNK_IDS_ALL, {"ns": ns}
    return CHUNK_IDS_OF_STRATEGY, {"ns": ns, "strategy": strategy}


def entity_keys(ns: str) -> Query:
    return ENTITY_KEYS, {"ns": ns}


def _scopes(scope_paths: list[str] | None) -> list[str] | None:
    return list(scope_paths) if scope_paths is not None else None


def entities_by_names(ns: str, names: list[str], limit: int = 50, scope_paths: list[str] | None = None) -> Query:
    return ENTITIES_BY_NAMES, {"ns": ns, "names": list(names), "limit": int(limit), "scope_paths": _scopes(scope_paths)}


def stats(ns: str, cooccurs: str = COOCCURS) -> Query:
    return STATS, {"ns": ns, "cooccurs": cooccurs}


def entity_degrees(ns: str) -> Query:
    return ENTITY_DEGREES, {"ns": ns}


def empty_entity_names(ns: str) -> Query:
    return EMPTY_ENTITY_NAMES, {"ns": ns}


def dangling_mentions(ns: str) -> Query:
    return DANGLING_MENTIONS, {"ns": ns}


def retrieval_chunks(ns: str, strategy: str) -> Query:
    return RETRIEVAL_CHUNKS, {"ns": ns, "strategy": strategy}


def retrieval_entities(ns: str) -> Query:
    return RETRIEVAL_ENTITIES, {"ns": ns}


def retrieval_relations(ns: str) -> Query:
    return RETRIEVAL_RELATIONS, {"ns": ns}


def retrieval_synonyms(ns: str) -> Query:
    return RETRIEVAL_SYNONYMS, {"ns": ns}


def retrieval_name_vectors(ns: str, models: list[str]) -> Query:
    return RETRIEVAL_NAME_VECTORS, {"ns": ns, "models": models}


def name_embedding_models(ns: str) -> Query:
    return NAME_EMBEDDING_MODELS, {"ns": ns}
