"""Sync the Neo4j graph of one chunking strategy with the current chunk set: extract new chunks only."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing, suppress
from dataclasses import dataclass

from ragloom import quality
from ragloom.embedding.base import Embedder
from ragloom.extraction.extractor import EntityExtractor, Extraction
from ragloom.indexing.sync import SyncReport, current_chunks, overlap_writes, plan
from ragloom.indexing.synonyms import SynonymLinker, SynonymParams
from ragloom.quality import SuiteOutcome
from ragloom.stores.embedding_cache import EmbeddingCache
from ragloom.stores.neo4j import Neo4jStore
from ragloom.types import Chunk, Log, no_log


@dataclass
class GraphSyncReport(SyncReport):
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_unchanged: int = 0
    documents_touched: int = 0
    entities: int = 0  # entities the new chunks mention (new or existing)
    mentions: int = 0
    relations: int = 0  # (source, target, type) relations that gained evidence
    surface_forms: int = 0
    relations_deleted: int = 0
    entities_deleted: int = 0
    documents_deleted: int = 0
    type_merges: int = 0  # (name, NER label) pairs merged onto the same name's entity under another label
    type_merge_examples: str = ""  # a few of them, "name: LABEL->LABEL"
    version: str = ""  # the graph version this sync stamped ("" when it changed nothing)
    entities_embedded: int = 0  # entity names embedded (entities new to the graph, or embedded by another model)
    synonym_edges: int = 0  # SYNONYM edges written for them
    synonym_seconds: float = 0.0  # embedding names, kNN and writing embeddings and edges (on the writer thread)
    synonym_embed_seconds: float = 0.0  # of it, embedding the names
    names_cached: int = 0  # distinct entity names whose vector the embedding cache held
    extraction_processes: int = 0  # spaCy processes the extraction ran in (1: in the run's own process)
    waves: int = 0  # extraction waves written one after the other
    extract_seconds: float = 0.0  # waiting for extraction (parsing and resolution)
    write_seconds: float = 0.0  # waiting for Neo4j writes: the part of the write work extraction did not hide
    write_work_seconds: float = 0.0  # all Neo4j write time, overlapped with extraction or not

    derived = ("merge_ratio",)

    @property
    def changed(self) -> bool:
        return bool(self.chunks_added or self.chunks_removed or self.entities_embedded)

    @property
    def merge_ratio(self) -> float:
        """Share of distinct surface forms resolution folded into another form's entity."""
        return (self.surface_forms - self.entities) / self.surface_forms if self.surface_forms else 0.0


def sync_graph(store: Neo4jStore, extractor: EntityExtractor, strategy: str, chunks: list[Chunk],
               log: Log = no_log, *, embedder: Embedder | None = None,
               synonyms: SynonymParams | None = None, cache: EmbeddingCache | None = None) -> GraphSyncReport:
    """Make the graph hold exactly ``chunks`` (all of ``strategy``): extract and write the new ones, delete
    the ones no longer present (withdrawing their evidence), refresh reading order of touched documents.

    Idempotent: a second call with the same chunks writes nothing. A chunk whose extraction was not
    completely written (a run that failed midway) counts as new again. With worker processes a large batch
    is extracted in waves, each written while the next is parsed (``EntityExtractor.extract_waves``).
    A sync that changes the graph, even one that fails midway, stamps a new graph version.

    With an ``embedder``, each wave's new entities get their name embedded and SYNONYM edges to close names
    (``ragloom.indexing.synonyms``); entities left without an embedding by an earlier run are done too.
    Names are embedded through ``cache`` when one is given (a name embedded once is never embedded again).
    """
    started = time.perf_counter()
    report = GraphSyncReport(strategy=strategy)
    linker = SynonymLinker(store, embedder, synonyms, log, cache) if embedder is not None else None
    try:
        _sync_chunks(store, extractor, strategy, chunks, report, log, linker)
        if linker is not None:
            linker.link()  # whatever an interrupted run left unembedded; one query when nothing is
    except BaseException:
        _synonym_figures(report, linker)
        if report.changed:  # readers must not keep a snapshot of what the graph held before the writes
            with suppress(Exception):
                report.version = store.stamp_version(strategy)
        raise
    _synonym_figures(report, linker)
    if report.changed:
        report.version = store.stamp_version(strategy)
    report.seconds = time.perf_counter() - started
    log(f"graph {strategy}: " + (f"version {report.version} (total {report.seconds:.1f}s)" if report.changed else
                                 f"{report.chunks_unchanged} chunks, nothing changed"))
    return report


def _synonym_figures(report: GraphSyncReport, linker: SynonymLinker | None) -> None:
    if linker is not None:
        report.entities_embedded = linker.stats.entities_embedded
        report.synonym_edges = linker.stats.synonym_edges
        report.synonym_seconds = linker.stats.seconds
        report.synonym_embed_seconds = linker.stats.embed_seconds
        report.names_cached = linker.stats.names_cached


def _write_wave(store: Neo4jStore, linker: SynonymLinker | None, extraction: Extraction) -> None:
    store.write_extraction(extraction, extraction.chunk_ids)
    if linker is not None:
        linker.link(e.entity_id for e in extraction.entities)


def _sync_chunks(store: Neo4jStore, extractor: EntityExtractor, strategy: str, chunks: list[Chunk],
                 report: GraphSyncReport, log: Log, linker: SynonymLinker | None) -> None:
    started = time.perf_counter()
    current = current_chunks("sync_graph", strategy, chunks)
    store.ensure_schema()
    stored = store.chunk_states(strategy)
    todo = plan(current, stored, incomplete={cid for cid, (_, complete) in stored.items() if not complete})
    report.chunks_added = len(todo.new)
    report.chunks_removed = len(todo.stale)
    report.chunks_unchanged = todo.unchanged
    if not todo.changed:
        return

    touched = {c.document_id for c in todo.new} | {stored[cid][0] for cid in todo.stale}
    report.documents_touched = len(touched)
    log(f"graph {strategy}: {len(todo.new)} new, {len(todo.stale)} removed, {report.chunks_unchanged} unchanged "
        f"chunks in {len(touched)} documents")

    write_started = time.perf_counter()
    if todo.stale:
        deleted = store.delete_chunks(todo.stale)
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

    entity_ids: set[str] = set()
    relation_keys: set[tuple[str, str, str]] = set()
    forms: set[tuple[str, str]] = set()
    type_merges: set[tuple[str, str, str]] = set()
    report.extraction_processes = extractor.processes_for(len(todo.new))
    if linker is not None and report.extraction_processes > 1:
        linker.share_cores()

    def extracted(waves: Iterator[Extraction]) -> Iterator[Extraction]:
        for extraction in waves:
            report.waves += 1
            report.extract_seconds += extraction.seconds
            forms.update(extraction.forms)
            type_merges.update(extraction.type_merges)
            entity_ids.update(e.entity_id for e in extraction.entities)
            relation_keys.update((r.source_id, r.target_id, r.type) for r in extraction.relations)
            report.mentions += len(extraction.mentions)
            log(f"graph {strategy}: extracted {len(extraction.entities)} entities, {len(extraction.mentions)} "
                f"mentions, {len(extraction.relations)} relation evidences from {extraction.chunks} chunks "
                f"({extraction.seconds:.1f}s waiting on extraction)")
            yield extraction

    # The writer stores wave k while the extractor's worker processes parse wave k+1. Waves are written in
    # order, so the mentions of a wave find the entities earlier waves created; a failed write stops the
    # run before the next wave is stored, and the waves stored before it stay done.
    with closing(extractor.extract_waves(todo.new, known=store.known_entities(), log=log)) as waves:
        times = overlap_writes(extracted(waves), lambda e: _write_wave(store, linker, e), thread_name="neo4j-write")
    report.write_seconds += times.waited_seconds
    report.write_work_seconds += times.work_seconds
    report.entities, report.relations = len(entity_ids), len(relation_keys)
    report.surface_forms = len(forms)  # distinct over all waves
    report.type_merges = len(type_merges)
    report.type_merge_examples = "; ".join(f"{key}: {label}->{onto}" for key, label, onto in sorted(type_merges)[:10])
    log(f"graph {strategy}: wrote {report.entities} entities ({report.type_merges} names merged across NER labels), "
        f"{report.mentions} mentions, {report.relations} relations; writes took {report.write_work_seconds:.1f}s, "
        f"{report.write_seconds:.1f}s of them not overlapped with extraction "
        f"({time.perf_counter() - started:.1f}s)")


def check_graph(store: Neo4jStore, strategy: str, chunk_ids: set[str]) -> SuiteOutcome:
    """For asset checks: the graph against the current chunk ids, and its broken records (the Great
    Expectations suite `ragloom.quality.check_graph`)."""
    return quality.check_graph(chunk_ids, store.chunk_ids(strategy), store.empty_entity_names(),
                               store.dangling_mentions())
