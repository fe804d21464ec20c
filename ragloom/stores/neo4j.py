"""The Neo4j graph of one namespace: documents, chunks, entities, mentions and relations; writes and lookups.

Model: (:Document)-[:HAS_CHUNK]->(:Chunk), (:Chunk)-[:NEXT]->(:Chunk) in reading order per document,
strategy and level, (:Chunk)-[:PARENT_OF]->(:Chunk), (:Chunk)-[:MENTIONS {count}]->(:Entity),
(:Entity)-[:RELATED_TO {type, weight, chunk_ids, chunk_weights}]->(:Entity). Chunk ids are the Weaviate
chunk ids. Every entity keeps ``chunk_count`` (distinct chunks mentioning it); a (:GraphMeta {ns, strategy})
node's ``version`` changes whenever a sync changes the graph. Entities carry ``embedding`` (their name's
unit-length embedding) and ``embedding_model``; (:Entity)-[:SYNONYM {score}]->(:Entity) links close names.
All Cypher lives in ragloom.stores.cypher.
"""

from __future__ import annotations

import threading
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ragloom.embedding.base import same_family
from ragloom.errors import ConfigError, StoreError
from ragloom.extraction.resolution import KnownEntity, voted_type
from ragloom.stores import cypher
from ragloom.stores.base import Closing
from ragloom.types import Chunk

if TYPE_CHECKING:
    from neo4j import Driver

    from ragloom.extraction.extractor import Extraction
    from ragloom.settings import Settings

DEFAULT_BATCH_SIZE = 5_000  # rows per write transaction (UNWIND)
EMBEDDING_BATCH_SIZE = 1_000  # entity embeddings per write transaction (a row is ~1.5 kB)
VECTOR_DTYPE = np.dtype("<f4")  # name embeddings are stored as these bytes: ~7x cheaper to send than a float list
MIN_BATCH_SIZE = 1_000


def encode_vector(vector: np.ndarray) -> bytes:
    """A vector as the bytes stored on an entity (little-endian float32)."""
    return np.asarray(vector, dtype=VECTOR_DTYPE).tobytes()


def decode_vectors(values: Sequence[Any]) -> np.ndarray:
    """Stored embeddings as a float32 matrix, one row each: bytes from :func:`encode_vector`, or the float
    lists graphs written before it hold (a namespace may mix both until its entities are embedded again)."""
    if not values:
        return np.zeros((0, 0), np.float32)
    return np.stack([np.frombuffer(v, dtype=VECTOR_DTYPE) if isinstance(v, (bytes, bytearray))
                     else np.asarray(v, dtype=np.float32) for v in values]).astype(np.float32, copy=False)


class EntityVectors(NamedTuple):
    ids: list[str]
    names: list[str]
    types: list[str]
    vectors: np.ndarray  # (len(ids), dimension) float32, unit rows


# namespace -> versions stamped by this process (see Neo4jStore.local_writes)
_STAMPS: dict[str, int] = {}
_STAMPS_LOCK = threading.Lock()


class Neo4jStore(Closing):
    """One graph namespace in Neo4j. ``connect`` opens (and ``close`` closes) its own driver; a store made
    from a driver you pass leaves that driver open."""

    def __init__(self, driver: Driver, namespace: str, *, database: str | None = None,
                 batch_size: int = DEFAULT_BATCH_SIZE, owns_driver: bool = False) -> None:
        if not isinstance(namespace, str) or not namespace.strip():
            raise ConfigError(f"graph namespace must be a non-empty string, got {namespace!r}")
        if batch_size < MIN_BATCH_SIZE:
            raise ConfigError(f"neo4j write batch size must be >= {MIN_BATCH_SIZE} rows, got {batch_size}")
        self.driver = driver
        self.namespace = namespace
        self.database = database
        self.batch_size = batch_size
        self._owns_connection = owns_driver
        self._schema_ready = False
        # One bookmark manager per store: a read after this store's write sees it on every cluster member
        # (causal consistency across the sessions _run opens), as on a single server.
        from neo4j import GraphDatabase

        self._bookmarks = GraphDatabase.bookmark_manager()

    @classmethod
    def connect(cls, settings: Settings, namespace: str | None = None, **kwargs: Any) -> Neo4jStore:
        """A store on the configured server (RAGLOOM_NEO4J_URI/USER/PASSWORD), namespace RAGLOOM_GRAPH_NAMESPACE."""
        from neo4j import GraphDatabase
        from neo4j.exceptions import AuthError, DriverError, Neo4jError

        uri = settings.resolved_neo4j_uri
        if not settings.neo4j_password:
            raise ConfigError("RAGLOOM_NEO4J_PASSWORD is unset and the local stack has not generated one: "
                              "run `ragloom stack up` or set RAGLOOM_NEO4J_PASSWORD")
        try:
            driver = GraphDatabase.driver(uri, auth=(settings.neo4j_user, settings.neo4j_password),
                                          connection_timeout=settings.neo4j_connection_timeout_seconds,
                                          connection_acquisition_timeout=settings.neo4j_connection_timeout_seconds,
                                          max_transaction_retry_time=settings.neo4j_retry_seconds)
        except (DriverError, ValueError) as e:
            raise StoreError(f"neo4j: invalid URI {uri!r}: {e}") from e
        try:
            driver.verify_connectivity()
        except AuthError as e:
            driver.close()
            raise StoreError(f"neo4j at {uri} refused user {settings.neo4j_user!r}: check RAGLOOM_NEO4J_USER and "
                             "RAGLOOM_NEO4J_PASSWORD") from e
        except (DriverError, Neo4jError, OSError) as e:
            driver.close()
            raise StoreError(f"neo4j at {uri} is unreachable ({e}): is it running? `ragloom stack up` starts "
                             "the local one") from e
        return cls(driver, namespace or settings.graph_namespace, owns_driver=True, **kwargs)

    def _close_connection(self) -> None:
        self.driver.close()

    # --- plumbing -------------------------------------------------------------------------------------

    def _run(self, query: cypher.Query, write: bool = False) -> list[dict[str, Any]]:
        """One statement in a managed transaction (retried by the driver on transient errors)."""
        from neo4j import NotificationMinimumSeverity
        from neo4j.exceptions import DriverError, Neo4jError, ServiceUnavailable, SessionExpired

        text, params = query

        def work(tx: Any) -> list[dict[str, Any]]:
            # dict(record.items()), not record.data(): data() walks every value element by element (5 s
            # instead of 0.4 s for 3,000 entity embeddings); ragloom's queries return values, never nodes.
            return [dict(record.items()) for record in tx.run(text, params)]

        try:
            # Notifications off: "property does not exist yet" warnings on an empty graph are noise in logs.
            # execute_read routes to a cluster's secondaries (neo4j:// URIs); writes go to the leader. Both are
            # retried by the driver on transient errors and leader switches.
            with self.driver.session(database=self.database, bookmark_manager=self._bookmarks,
                                     notifications_min_severity=NotificationMinimumSeverity.OFF) as session:
                return session.execute_write(work) if write else session.execute_read(work)
        except (Neo4jError, DriverError) as e:
            what = f"neo4j ({'write' if write else 'read'} in namespace {self.namespace!r})"
            if isinstance(e, ServiceUnavailable | SessionExpired):  # after the driver's retries
                raise StoreError(f"{what}: the server did not answer in time or could not be reached ({e}); "
                                 "RAGLOOM_NEO4J_RETRY_SECONDS and RAGLOOM_NEO4J_CONNECTION_TIMEOUT_SECONDS bound "
                                 "the wait") from e
            raise StoreError(f"{what}: {e}") from e

    def _write_rows(self, builder: Any, rows: list[Any]) -> int:
        for batch in cypher.batched(rows, self.batch_size):
            self._run(builder(self.namespace, batch), write=True)
        return len(rows)

    def ensure_schema(self) -> None:
        """Constraints, indexes and the entity full-text index (idempotent); waits until they are online."""
        if self._schema_ready:
            return
        for statement in cypher.SCHEMA:
            try:
                self._run((statement, {}), write=True)
            except StoreError as e:
                # Another process created the same rule between our IF NOT EXISTS check and ours.
                if "AlreadyExists" not in str(getattr(e.__cause__, "code", "")):
                    raise
        self._run((cypher.AWAIT_INDEXES, {"seconds": 120}))
        self._schema_ready = True

    # --- writes ---------------------------------------------------------------------------------------

    def upsert_chunks(self, chunks: list[Chunk]) -> int:
        """Document and chunk nodes (properties refreshed), HAS_CHUNK, and PARENT_OF to each chunk's parent."""
        self.ensure_schema()
        rows = [{
            "chunk_id": c.chunk_id, "document_id": c.document_id, "strategy": c.strategy, "level": c.level,
            "position": c.position, "scope_path": c.scope.path, "parent_id": c.parent_id, "start": c.start,
            "end": c.end, "heading_path": list(c.heading_path),
        } for c in chunks]
        self._write_rows(cypher.upsert_chunks, rows)
        parents = [{"parent_id": c.parent_id, "chunk_id": c.chunk_id} for c in chunks if c.parent_id]
        self._write_rows(cypher.link_parents, parents)
        return len(rows)

    def relink_next(self, chunks: list[Chunk]) -> int:
        """Rebuild NEXT for every (document, strategy) these chunks belong to; pass all current chunks of
        those documents. Returns the number of NEXT links."""
        groups: dict[tuple[str, str, int], list[Chunk]] = defaultdict(list)
        for c in chunks:
            groups[(c.document_id, c.strategy, c.level)].append(c)
        documents = sorted({(doc, strategy) for doc, strategy, _ in groups})
        self._write_rows(cypher.unlink_next, [{"document_id": d, "strategy": s} for d, s in documents])
        links = []
        for members in groups.values():
            members.sort(key=lambda c: (c.position, c.start))
            pairs = zip(members, members[1:], strict=False)
            links.extend({"source": a.chunk_id, "target": b.chunk_id} for a, b in pairs)
        self._write_rows(cypher.link_next, links)
        return len(links)

    def write_extraction(self, extraction: Extraction, chunk_ids: Iterable[str]) -> dict[str, int]:
        """Entities (merged onto existing ones by id), mentions and relation evidence of extracted chunks,
        then marks ``chunk_ids`` as extracted. The chunk nodes must exist (``upsert_chunks``)."""
        self.ensure_schema()
        entity_rows = []
        for e in extraction.entities:
            keys = extraction.keys.get(e.entity_id, ())
            entity_rows.append({"entity_id": e.entity_id, "name": e.name, "type": e.type,
                                "norm": keys[0] if keys else e.name.casefold(),
                                "aliases": [e.name, *e.aliases], "alias_norms": list(keys[1:])})
        self._write_rows(cypher.upsert_entities, entity_rows)
        mention_rows = [{"chunk_id": m.chunk_id, "entity_id": m.entity_id, "count": m.count,
                         "labels": [label for label, _ in m.labels], "label_counts": [n for _, n in m.labels],
                         "cues": [cue for cue, _ in m.cues], "cue_counts": [n for _, n in m.cues]}
                        for m in extraction.mentions]
        self._write_rows(cypher.write_mentions, mention_rows)
        self.update_entity_counts(sorted({m.entity_id for m in extraction.mentions}))
        evidence: dict[tuple[str, str, str], dict[str, int]] = defaultdict(dict)
        for r in extraction.relations:
            per_chunk = evidence[(r.source_id, r.target_id, r.type)]
            per_chunk[r.chunk_id] = per_chunk.get(r.chunk_id, 0) + r.weight
        relation_rows = [{"source": s, "target": t, "type": k, "chunk_ids": list(per_chunk),
                          "weights": list(per_chunk.values())} for (s, t, k), per_chunk in evidence.items()]
        self._write_rows(cypher.write_relations, relation_rows)
        self._write_rows(cypher.mark_extracted, list(chunk_ids))
        return {"entities": len(entity_rows), "mentions": len(mention_rows), "relations": len(relation_rows)}

    def delete_chunks(self, chunk_ids: Iterable[str]) -> dict[str, int]:
        """Remove chunks with their links in one pass: withdraw their relation evidence, delete relations,
        entities and documents nothing supports any more."""
        ids = sorted(set(chunk_ids))
        counts = {"chunks": 0, "relations_updated": 0, "relations_deleted": 0, "entities_deleted": 0,
                  "documents_deleted": 0}
        if not ids:
            return counts
        self.ensure_schema()
        documents: set[str] = set()
        entities: set[str] = set()
        for batch in cypher.batched(ids, self.batch_size):
            scope = self._run(cypher.removal_scope(self.namespace, batch), write=True)
            if scope:
                documents.update(scope[0]["document_ids"])
                entities.update(scope[0]["entity_ids"])
            withdrawn = self._run(cypher.withdraw_evidence(self.namespace, batch), write=True)
            if withdrawn:
                counts["relations_updated"] += withdrawn[0]["updated"]
                counts["relations_deleted"] += withdrawn[0]["deleted"]
            counts["chunks"] += self._run(cypher.delete_chunks(self.namespace, batch), write=True)[0]["deleted"]
        for batch in cypher.batched(sorted(entities), self.batch_size):
            counts["entities_deleted"] += self._run(
                cypher.delete_orphan_entities(self.namespace, batch), write=True)[0]["deleted"]
        self.update_entity_counts(sorted(entities))  # the survivors among them
        for batch in cypher.batched(sorted(documents), self.batch_size):
            counts["documents_deleted"] += self._run(
                cypher.delete_empty_documents(self.namespace, batch), write=True)[0]["deleted"]
        return counts

    def update_entity_counts(self, entity_ids: Sequence[str]) -> dict[str, str]:
        """Recount these entities' chunk counts, type votes and type cues from their mentions, and retype each
        whose stored type lost (``voted_type``: cues outrank labels, a tie keeps the stored type). Returns
        {entity id: new type} of the types that moved."""
        moved: dict[str, str] = {}
        for batch in cypher.batched(list(entity_ids), self.batch_size):
            for r in self._run(cypher.update_entity_counts(self.namespace, batch), write=True):
                typed = voted_type(dict(zip(r["labels"], r["votes"], strict=True)), r["type"],
                                   dict(zip(r["cues"], r["cue_counts"], strict=True)))
                if typed != r["type"]:
                    moved[r["entity_id"]] = typed
        self._write_rows(cypher.set_types, [{"entity_id": eid, "type": t} for eid, t in sorted(moved.items())])
        return moved

    def write_entity_embeddings(self, entity_ids: list[str], vectors: np.ndarray, model: str, linked: str) -> int:
        """Store each entity's name embedding (float32 bytes, :func:`encode_vector`), the id of the embedder that
        made it and the synonym settings its edges were linked with (``SynonymParams.key``)."""
        rows = [{"entity_id": eid, "embedding": encode_vector(vector)} for eid, vector in zip(entity_ids, vectors,
                                                                                               strict=True)]
        for batch in cypher.batched(rows, EMBEDDING_BATCH_SIZE):
            self._run(cypher.write_entity_embeddings(self.namespace, batch, model, linked), write=True)
        return len(rows)

    def write_synonyms(self, pairs: list[tuple[str, str, float]]) -> int:
        """SYNONYM edges (source)-[:SYNONYM {score}]->(target), merged: a re-run changes nothing."""
        rows = [{"source": a, "target": b, "score": score} for a, b, score in pairs]
        return self._write_rows(cypher.write_synonyms, rows)

    def drop_synonyms(self, entity_ids: list[str]) -> None:
        """Remove every SYNONYM edge of these entities, either direction."""
        self._write_rows(cypher.drop_synonyms, list(entity_ids))

    def rescope_document(self, document_id: str, from_paths: list[str], scope_path: str) -> int:
        """Move a document's chunks whose scope is one of ``from_paths`` to ``scope_path``; returns how many.
        Entities and relations stay: their visibility follows the chunks that mention them."""
        rows = self._run(cypher.rescope_document(self.namespace, document_id, from_paths, scope_path), write=True)
        moved = int(rows[0]["moved"]) if rows else 0
        if moved:
            self.stamp_version(None)  # a reader's snapshot holds each chunk's scope
        return moved

    def stamp_version(self, strategy: str | None) -> str:
        """Give the graph a new version (a random token, never reused): readers holding another one reload.
        Every strategy's version in this namespace moves, since they share the entities; ``strategy``'s
        GraphMeta node is created if missing (None: only existing ones move)."""
        self.ensure_schema()
        version = uuid.uuid4().hex
        self._run(cypher.stamp_version(self.namespace, strategy, version), write=True)
        with _STAMPS_LOCK:
            _STAMPS[self.namespace] = _STAMPS.get(self.namespace, 0) + 1
        return version

    def local_writes(self) -> int:
        """How many versions this process stamped in this namespace (any store object): a reader that trusts
        its last version read for a while (``GraphCache``) re-reads at once after a sync in its own process."""
        return _STAMPS.get(self.namespace, 0)

    def clear(self) -> int:
        """Delete everything in this namespace (in batches); returns the number of nodes deleted."""
        total = 0
        for label in ("Chunk", "Entity", "Document", "GraphMeta"):
            while True:
                deleted = self._run(cypher.clear_label(self.namespace, label), write=True)[0]["deleted"]
                total += deleted
                if deleted == 0:
                    break
        return total

    # --- reads ----------------------------------------------------------------------------------------

    def chunk_ids(self, strategy: str | None = None) -> set[str]:
        return {r["chunk_id"] for r in self._run(cypher.chunk_ids(self.namespace, strategy))}

    def chunk_states(self, strategy: str) -> dict[str, tuple[str, bool]]:
        """chunk id -> (document id, whether its extraction was written completely)."""
        rows = self._run(cypher.chunk_states(self.namespace, strategy))
        return {r["chunk_id"]: (r["document_id"], bool(r["extracted"])) for r in rows}

    def graph_version(self, strategy: str) -> str | None:
        """The version the last sync that changed this namespace's graph stamped (None: never synced)."""
        rows = self._run(cypher.graph_version(self.namespace, strategy))
        return rows[0]["version"] if rows else None

    def entities_to_embed(self, model: str, linked: str, entity_ids: list[str] | None = None) -> list[dict]:
        """[{entity_id, name, type}] of the entities (among ``entity_ids``; None: all) lacking an embedding
        from ``model`` or synonym edges linked with the settings ``linked``."""
        if entity_ids is None:
            return self._run(cypher.entities_to_embed(self.namespace, model, linked))
        out: list[dict] = []
        for batch in cypher.batched(entity_ids, self.batch_size):
            out.extend(self._run(cypher.entities_to_embed(self.namespace, model, linked, batch)))
        return out

    def entity_embeddings(self, model: str, linked: str | None = None) -> EntityVectors:
        """The entities with a name embedding from ``model`` (and linked with ``linked``, when given), and
        those embeddings as a float32 matrix."""
        rows = self._run(cypher.entity_embeddings(self.namespace, model, linked))
        vectors = decode_vectors([r["embedding"] for r in rows])
        return EntityVectors([r["entity_id"] for r in rows], [r["name"] for r in rows], [r["type"] for r in rows],
                             vectors)

    def synonyms(self) -> list[dict]:
        """Every SYNONYM edge: [{source_id, source, target_id, target, score}] (names), highest score first."""
        return self._run(cypher.synonym_edges(self.namespace))

    def known_entities(self) -> list[KnownEntity]:
        """Every entity's id, type and normalized names, so new surface forms resolve onto it."""
        return [KnownEntity(r["entity_id"], r["type"], tuple(k for k in r["keys"] if k))
                for r in self._run(cypher.entity_keys(self.namespace))]

    def entities_by_names(self, names: list[str], limit: int = 50, scope_paths: list[str] | None = None) -> list[dict]:
        """Entities whose normalized name or alias equals one of ``names`` (see normalize_name):
        [{entity_id, name, type, norm, chunks}] (norm: the normalized canonical name), most mentioned first."""
        names = [n for n in dict.fromkeys(names) if n]
        if not names:
            return []
        return self._run(cypher.entities_by_names(self.namespace, names, limit, scope_paths))

    def retrieval_graph_rows(self, strategy: str) -> dict[str, dict[str, list]]:
        """The graph ragloom.retrieval.graph_index builds its snapshot from, as columns (one list per field):
        ``chunks`` of ``strategy`` {chunk_id, scope_path, entity_ids, counts}, the namespace's ``entities``
        {entity_id, name, type, norm, alias_norms}, ``relations`` {source, target, type, chunk_ids,
        chunk_weights} (per-chunk evidence) and ``synonyms`` {source, target, score}."""
        return {"chunks": self._run(cypher.retrieval_chunks(self.namespace, strategy))[0],
                "entities": self._run(cypher.retrieval_entities(self.namespace))[0],
                "relations": self._run(cypher.retrieval_relations(self.namespace))[0],
                "synonyms": self._run(cypher.retrieval_synonyms(self.namespace))[0]}

    def retrieval_name_vectors(self, model: str) -> tuple[list[str], np.ndarray]:
        """(entity ids, their name embeddings as a float32 matrix) of the entities that have one from ``model`` or
        another backend of it (``same_family``: a graph built on a GPU serves a CPU query side); the synonym pass
        stores them at ingest."""
        stored = [r["model"] for r in self._run(cypher.name_embedding_models(self.namespace))]
        models = [m for m in stored if same_family(m, model)] or [model]
        row = self._run(cypher.retrieval_name_vectors(self.namespace, models))[0]
        vectors = decode_vectors(row["embedding"])
        return list(row["entity_id"]), vectors

    def stats(self, top: int = 10) -> dict:
        """Counts, the ``top`` entities by degree, and every entity's degree (for a histogram)."""
        counts = self._run(cypher.stats(self.namespace))[0]
        degrees = self._run(cypher.entity_degrees(self.namespace))
        return {**counts, "top_entities": degrees[:top], "degrees": [r["degree"] for r in degrees]}

    def ready(self) -> bool:
        """Whether the server answers (health checks): any failure to answer is "not ready"."""
        try:
            self.driver.verify_connectivity()
            return True
        except Exception:  # noqa: BLE001 - a health probe: every failure means not ready
            return False

    # --- checks ---------------------------------------------------------------------------------------

    def empty_entity_names(self) -> int:
        return self._run(cypher.empty_entity_names(self.namespace))[0]["n"]

    def dangling_mentions(self) -> int:
        return self._run(cypher.dangling_mentions(self.namespace))[0]["n"]

