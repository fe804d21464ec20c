"""Sync the Neo4j graph of one chunking strategy with the current chunk set: extract new chunks only."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ragloom.errors import ConfigError
from ragloom.extraction.extractor import EntityExtractor
from ragloom.stores.neo4j import Neo4jStore
from ragloom.types import Chunk

Log = Callable[[str], None]


def _no_log(message: str) -> None:
    pass


@dataclass
class GraphSyncReport:
    strategy: str
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_unchanged: int = 0
    documents_touched: int = 0
    entities: int = 0  # entities the new chunks mention (new or existing)
    mentions: int = 0
    relations: int = 0  # (source, target, type) relations that gained evidence
    surface_forms: int = 0
    merge_ratio: float = 0.0  # share of distinct surface forms resolution folded into another form's entity
    relations_deleted: int = 0
    entities_deleted: int = 0
    documents_deleted: int = 0
    extract_seconds: float = 0.0
    write_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return bool(self.chunks_added or self.chunks_removed)


def sync_graph(store: Neo4jStore, extractor: EntityExtractor, strategy: str, chunks: list[Chunk],
               log: Log = _no_log) -> GraphSyncReport:
    """Make the graph hold exactly ``chunks`` (all of ``strategy``): extract and write the new ones, delete
    the ones no longer present (withdrawing their evidence), refresh reading order of touched documents.

    Idempotent: a second call with the same chunks writes nothing. A chunk whose extraction was not
    completely written (a run that failed midway) counts as new again.
    """
    started = time.perf_counter()
    report = GraphSyncReport(strategy=strategy)
    other = sorted({c.strategy for c in chunks if c.strategy != strategy})
    if other:
        raise ConfigError(f"sync_graph(strategy={strategy!r}) was given chunks of strategy {other}")
    current = {c.chunk_id: c for c in chunks}
    store.ensure_schema()
    stored = store.chunk_states(strategy)
    new_ids = [cid for cid in current if cid not in stored or not stored[cid][1]]
    removed_ids = sorted(cid for cid in stored if cid not in current)
    report.chunks_added = len(new_ids)
    report.chunks_removed = len(removed_ids)
    report.chunks_unchanged = len(current) - len(new_ids)
    if not new_ids and not removed_ids:
        report.seconds = time.perf_counter() - started
        log(f"graph {strategy}: {len(current)} chunks, nothing changed")
        return report

    touched = {current[cid].document_id for cid in new_ids} | {stored[cid][0] for cid in removed_ids}
    report.documents_touched = len(touched)
    log(f"graph {strategy}: {len(new_ids)} new, {len(removed_ids)} removed, {report.chunks_unchanged} unchanged "
        f"chunks in {len(touched)} documents")

    write_started = time.perf_counter()
    if removed_ids:
        deleted = store.delete_chunks(removed_ids)
        report.relations_deleted = deleted["relations_deleted"]
        report.entities_deleted = deleted["entities_deleted"]
        report.documents_deleted = deleted["documents_deleted"]
        log(f"graph {strategy}: removed {deleted['chunks']} chunks; {deleted['relations_updated']} relations lost "
            f"evidence, {deleted['relations_deleted']} relations, {deleted['entities_deleted']} entities and "
            f"{deleted['documents_deleted']} documents deleted")
    # Every current chunk of a touched document is rewritten: positions shift when a document changes.
    in_touched = [c for c in current.values() if c.document_id in touched]
    store.upsert_chunks(in_touched)
    store.relink_next(in_touched)
    report.write_seconds += time.perf_counter() - write_started

    new_chunks = [current[cid] for cid in new_ids]
    extraction = extractor.extract(new_chunks, known=store.known_entities(), log=log)
    report.extract_seconds = extraction.seconds
    report.surface_forms = extraction.surface_forms
    report.merge_ratio = extraction.merge_ratio
    log(f"graph {strategy}: extracted {len(extraction.entities)} entities, {len(extraction.mentions)} mentions, "
        f"{len(extraction.relations)} relation evidences from {len(new_chunks)} chunks in {extraction.seconds:.1f}s "
        f"({len(new_chunks) / max(extraction.seconds, 1e-9):.0f} chunks/s)")

    write_started = time.perf_counter()
    written = store.write_extraction(extraction, new_ids)
    report.write_seconds += time.perf_counter() - write_started
    report.entities, report.mentions, report.relations = written["entities"], written["mentions"], written["relations"]
    report.seconds = time.perf_counter() - started
    log(f"graph {strategy}: wrote {report.entities} entities, {report.mentions} mentions, {report.relations} "
        f"relations in {report.write_seconds:.1f}s (total {report.seconds:.1f}s)")
    return report
