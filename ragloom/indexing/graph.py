"""Sync the Neo4j graph of one chunking strategy with the current chunk set: extract new chunks only."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
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
    extraction_processes: int = 0  # spaCy processes the extraction ran in (1: in the run's own process)
    waves: int = 0  # extraction waves written one after the other
    extract_seconds: float = 0.0  # waiting for extraction (parsing and resolution)
    write_seconds: float = 0.0  # waiting for Neo4j writes: the part of the write work extraction did not hide
    write_work_seconds: float = 0.0  # all Neo4j write time, overlapped with extraction or not
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return bool(self.chunks_added or self.chunks_removed)


def sync_graph(store: Neo4jStore, extractor: EntityExtractor, strategy: str, chunks: list[Chunk],
               log: Log = _no_log) -> GraphSyncReport:
    """Make the graph hold exactly ``chunks`` (all of ``strategy``): extract and write the new ones, delete
    the ones no longer present (withdrawing their evidence), refresh reading order of touched documents.

    Idempotent: a second call with the same chunks writes nothing. A chunk whose extraction was not
    completely written (a run that failed midway) counts as new again. With worker processes a large batch
    is extracted in waves, each written while the next is parsed (``EntityExtractor.extract_waves``).
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

    report.write_work_seconds = report.write_seconds
    new_chunks = [current[cid] for cid in new_ids]
    entity_ids: set[str] = set()
    relation_keys: set[tuple[str, str, str]] = set()
    forms: set[tuple[str, str]] = set()
    report.extraction_processes = extractor.processes_for(len(new_chunks))
    waves = extractor.extract_waves(new_chunks, known=store.known_entities(), log=log)
    # One writer thread stores wave k while the extractor's worker processes parse wave k+1. Waves are written
    # in order, so the mentions of a wave find the entities earlier waves created; a failed write stops the
    # run before the next wave is stored, and the waves stored before it stay done.
    with closing(waves), ThreadPoolExecutor(max_workers=1, thread_name_prefix="neo4j-write") as writer:
        pending: Future[float] | None = None
        for extraction in waves:
            report.waves += 1
            report.extract_seconds += extraction.seconds
            forms |= extraction.forms
            entity_ids.update(e.entity_id for e in extraction.entities)
            relation_keys.update((r.source_id, r.target_id, r.type) for r in extraction.relations)
            report.mentions += len(extraction.mentions)
            log(f"graph {strategy}: extracted {len(extraction.entities)} entities, {len(extraction.mentions)} "
                f"mentions, {len(extraction.relations)} relation evidences from {extraction.chunks} chunks "
                f"({extraction.seconds:.1f}s waiting on extraction)")
            if pending is not None:
                _finish(pending, report)
            pending = writer.submit(_timed, store.write_extraction, extraction, extraction.chunk_ids)
        if pending is not None:
            _finish(pending, report)
    report.entities, report.relations = len(entity_ids), len(relation_keys)
    # Distinct surface forms over all waves, and the share of them folded into another form's entity.
    report.surface_forms = len(forms)
    report.merge_ratio = (len(forms) - len(entity_ids)) / len(forms) if forms else 0.0
    report.seconds = time.perf_counter() - started
    log(f"graph {strategy}: wrote {report.entities} entities, {report.mentions} mentions, {report.relations} "
        f"relations; writes took {report.write_work_seconds:.1f}s, {report.write_seconds:.1f}s of them not "
        f"overlapped with extraction (total {report.seconds:.1f}s)")
    return report


def _timed(write: Callable[..., object], *args: object) -> float:
    started = time.perf_counter()
    write(*args)
    return time.perf_counter() - started


def _finish(pending: Future[float], report: GraphSyncReport) -> None:
    """Wait for a wave's write (re-raising its error); the wait is write time extraction did not hide."""
    waited = time.perf_counter()
    report.write_work_seconds += pending.result()
    report.write_seconds += time.perf_counter() - waited
