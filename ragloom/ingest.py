"""Incremental ingestion: collect documents from the source folders, re-chunk only what changed.

The stores are synced against the full current chunk set afterwards (ragloom.indexing), so a removed
document is a tombstone by absence: its chunks are no longer current and the sync deletes them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ragloom.metadata import MetadataError, MetadataLayout
from ragloom.parsing import ATTACHED_TO, ParseLimits, parse_sources
from ragloom.tables import chunks_to_frame, frame_to_documents
from ragloom.types import Document, Log, Rejection, Scope


@dataclass(frozen=True)
class Source:
    """A folder of documents. Ids get ``<name>/`` in front so two folders never collide."""

    name: str
    root: Path
    scope_from_path: bool = False  # uploads/<tenant>/<user>/<chat>/... sets the scope
    scope: Scope | None = None  # every document's scope (a sidecar or the folders may narrow it); None: shared


@dataclass
class CollectedDocuments:
    documents: list[Document]
    rejections: list[Rejection]
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # tombstones: present last run, gone now
    seconds: float = 0.0


def collect_documents(sources: Iterable[Source], previous: pd.DataFrame | None, log: Log = print,
                      limits: ParseLimits | None = None, metadata: MetadataLayout | None = None) -> CollectedDocuments:
    """Parse every source file once (under ``limits``) and classify documents against the previous run's table.

    A document whose metadata ``metadata`` (the stores' layout) refuses (a cap, a value a declared key's type
    cannot hold) is rejected here with the reason, so that it never reaches a store and the others go on."""
    layout = metadata or MetadataLayout()
    started = time.monotonic()
    documents: list[Document] = []
    rejections: list[Rejection] = []
    for source in sources:
        if not source.root.exists():
            log(f"source {source.name}: {source.root} does not exist yet, nothing to read")
            continue
        batch = parse_sources([source.root], source.root, scope=source.scope, scope_from_path=source.scope_from_path,
                              limits=limits)
        for doc in batch.documents:
            doc.document_id = f"{source.name}/{doc.document_id}"
            if isinstance(doc.metadata.get(ATTACHED_TO), str):  # an attachment names its email by document id
                doc.metadata[ATTACHED_TO] = f"{source.name}/{doc.metadata[ATTACHED_TO]}"
            doc.source_path = str(source.root / doc.source_path)
        refused = []
        for doc in batch.documents:
            try:
                layout.prepare(doc.metadata)
                documents.append(doc)
            except MetadataError as e:
                refused.append(Rejection(doc.source_path, "metadata", f"document {doc.document_id}: {e}"))
        rejections.extend(Rejection(str(source.root / r.source_path), r.reason, r.detail) for r in batch.rejections)
        rejections.extend(refused)
        log(f"source {source.name}: {len(batch.documents) - len(refused)} documents, "
            f"{len(batch.rejections) + len(refused)} rejected ({source.root})")

    kept = _keep_previous_versions(rejections, previous, {d.document_id for d in documents})
    if kept:
        log(f"kept the previous version of {len(kept)} documents whose files could not be read this time")
        documents.extend(kept)

    before = {} if previous is None else dict(zip(previous["document_id"], previous["content_hash"], strict=True))
    result = CollectedDocuments(documents, rejections)
    for doc in documents:
        if doc.document_id not in before:
            result.new.append(doc.document_id)
        elif before[doc.document_id] != doc.content_hash:
            result.changed.append(doc.document_id)
        else:
            result.unchanged.append(doc.document_id)
    current = {d.document_id for d in documents}
    result.removed = sorted(set(before) - current)
    result.seconds = time.monotonic() - started
    return result


# A file that exists but could not be read this time (changing while read, a permission blip) is not a
# deletion: its last good version stays current until a later run reads it.
TRANSIENT_REASONS = frozenset({"unreadable"})


def _keep_previous_versions(rejections: list[Rejection], previous: pd.DataFrame | None,
                            current: set[str]) -> list[Document]:
    paths = {r.source_path for r in rejections if r.reason in TRANSIENT_REASONS and Path(r.source_path).exists()}
    if not paths or previous is None or previous.empty:
        return []
    rows = previous[previous["source_path"].isin(paths) & ~previous["document_id"].isin(current)]
    return frame_to_documents(rows) if len(rows) else []


@dataclass
class ChunkingOutcome:
    frame: pd.DataFrame
    documents_chunked: int
    documents_reused: int
    chunks_new: int
    seconds: float


def chunk_incremental(documents: list[Document], previous: pd.DataFrame | None, chunker, log: Log = print,
                      progress_every: int = 200) -> ChunkingOutcome:
    """Chunks for every current document, re-using last run's rows where document and chunker are unchanged.

    The frame carries two bookkeeping columns, ``document_hash`` and ``chunker_key``, that make this check.
    """
    started = time.monotonic()
    chunker_key = chunker.params_key
    reusable: dict[str, pd.DataFrame] = {}
    if previous is not None and not previous.empty and "chunker_key" in previous:
        same_settings = previous[previous["chunker_key"] == chunker_key]
        reusable = {doc_id: rows for doc_id, rows in same_settings.groupby("document_id", sort=False)}

    kept: list[pd.DataFrame] = []
    fresh = []
    fresh_hash: dict[str, str] = {}
    to_chunk = []
    for doc in documents:
        rows = reusable.get(doc.document_id)
        if rows is not None and (rows["document_hash"] == doc.content_hash).all():
            kept.append(rows)
        else:
            to_chunk.append(doc)
    # chunk_many lets a strategy batch across documents (semantic embeds all sentences in one call)
    for i in range(0, len(to_chunk), progress_every):
        batch = to_chunk[i : i + progress_every]
        fresh.extend(chunker.chunk_many(batch))
        fresh_hash.update((doc.document_id, doc.content_hash) for doc in batch)
        log(f"{chunker.name}: chunked {min(i + progress_every, len(to_chunk))}/{len(to_chunk)} changed documents")
    new_frame = chunks_to_frame(fresh)
    new_frame["document_hash"] = new_frame["document_id"].map(fresh_hash)
    new_frame["chunker_key"] = chunker_key
    frames = [f for f in (*kept, new_frame) if not f.empty]
    frame = pd.concat(frames, ignore_index=True) if frames else new_frame
    return ChunkingOutcome(frame, len(to_chunk), len(documents) - len(to_chunk), len(fresh),
                           time.monotonic() - started)

