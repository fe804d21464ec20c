"""Documents, chunks and rejections <-> pyarrow tables and pandas frames with fixed column types, for Parquet.

Nested values travel as JSON strings (metadata, headings, page_starts) or a scope path string, so the
Parquet schema never depends on what metadata a corpus happens to carry. Round trips are exact.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pandas as pd
import pyarrow as pa

from ragloom.types import Chunk, Document, Heading, Rejection, Scope

T = TypeVar("T")

DOCUMENT_SCHEMA = pa.schema([
    pa.field("document_id", pa.string(), nullable=False),
    pa.field("title", pa.string(), nullable=False),
    pa.field("text", pa.large_string(), nullable=False),
    pa.field("source_path", pa.string(), nullable=False),
    pa.field("format", pa.string(), nullable=False),
    pa.field("content_hash", pa.string(), nullable=False),
    pa.field("modified_at", pa.float64(), nullable=False),
    pa.field("headings", pa.string(), nullable=False),  # JSON [[level, title, start, end], ...]
    pa.field("page_starts", pa.string(), nullable=False),  # JSON [int, ...]
    pa.field("metadata", pa.string(), nullable=False),  # JSON object
    pa.field("scope_path", pa.string(), nullable=False),  # Scope.path
])

CHUNK_SCHEMA = pa.schema([
    pa.field("chunk_id", pa.string(), nullable=False),
    pa.field("document_id", pa.string(), nullable=False),
    pa.field("strategy", pa.string(), nullable=False),
    pa.field("text", pa.large_string(), nullable=False),
    pa.field("start", pa.int64(), nullable=False),
    pa.field("end", pa.int64(), nullable=False),
    pa.field("token_count", pa.int64(), nullable=False),
    pa.field("position", pa.int64(), nullable=False),
    pa.field("level", pa.int64(), nullable=False),
    pa.field("parent_id", pa.string(), nullable=True),
    pa.field("heading_path", pa.list_(pa.string()), nullable=False),
    pa.field("embed_text", pa.large_string(), nullable=False),
    pa.field("metadata", pa.string(), nullable=False),
    pa.field("scope_path", pa.string(), nullable=False),
])

REJECTION_SCHEMA = pa.schema([
    pa.field("source_path", pa.string(), nullable=False),
    pa.field("reason", pa.string(), nullable=False),
    pa.field("detail", pa.string(), nullable=False),
])


def _dumps(value: Any) -> str:
    # ensure_ascii=False keeps non-ASCII readable in the Parquet file; key order is kept, not sorted
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class Codec(Generic[T]):
    """One record type <-> rows of a fixed schema, as a pyarrow table or a pandas frame."""

    schema: pa.Schema
    to_row: Callable[[T], dict[str, Any]]
    from_row: Callable[[dict[str, Any]], T]

    def to_table(self, records: Iterable[T]) -> pa.Table:
        return pa.Table.from_pylist([self.to_row(r) for r in records], schema=self.schema)

    def to_frame(self, records: Iterable[T]) -> pd.DataFrame:
        return self.to_table(records).to_pandas()

    def from_table(self, data: pa.Table | pd.DataFrame) -> list[T]:
        """Records from a table or a frame (columns beyond the schema's are ignored)."""
        if isinstance(data, pd.DataFrame):
            data = pa.Table.from_pandas(data, schema=self.schema, preserve_index=False)
        return [self.from_row(r) for r in data.select(self.schema.names).to_pylist()]


def _document_row(d: Document) -> dict[str, Any]:
    return {
        "document_id": d.document_id, "title": d.title, "text": d.text, "source_path": d.source_path,
        "format": d.format, "content_hash": d.content_hash, "modified_at": float(d.modified_at),
        "headings": _dumps([[h.level, h.title, h.start, h.end] for h in d.headings]),
        "page_starts": _dumps(list(d.page_starts)), "metadata": _dumps(d.metadata), "scope_path": d.scope.path,
    }


def _document(r: dict[str, Any]) -> Document:
    return Document(
        document_id=r["document_id"], title=r["title"], text=r["text"], source_path=r["source_path"],
        format=r["format"], content_hash=r["content_hash"], modified_at=r["modified_at"],
        headings=[Heading(level, title, start, end) for level, title, start, end in json.loads(r["headings"])],
        page_starts=json.loads(r["page_starts"]), metadata=json.loads(r["metadata"]),
        scope=Scope.from_path(r["scope_path"]),
    )


def _chunk_row(c: Chunk) -> dict[str, Any]:
    return {
        "chunk_id": c.chunk_id, "document_id": c.document_id, "strategy": c.strategy, "text": c.text,
        "start": c.start, "end": c.end, "token_count": c.token_count, "position": c.position, "level": c.level,
        "parent_id": c.parent_id, "heading_path": list(c.heading_path), "embed_text": c.embed_text,
        "metadata": _dumps(c.metadata), "scope_path": c.scope.path,
    }


def _chunk(r: dict[str, Any]) -> Chunk:
    return Chunk(
        chunk_id=r["chunk_id"], document_id=r["document_id"], strategy=r["strategy"], text=r["text"],
        start=r["start"], end=r["end"], token_count=r["token_count"], position=r["position"], level=r["level"],
        parent_id=r["parent_id"], heading_path=list(r["heading_path"]), embed_text=r["embed_text"],
        metadata=json.loads(r["metadata"]), scope=Scope.from_path(r["scope_path"]),
    )


def _rejection_row(r: Rejection) -> dict[str, Any]:
    return {"source_path": r.source_path, "reason": r.reason, "detail": r.detail}


DOCUMENTS = Codec(DOCUMENT_SCHEMA, _document_row, _document)
CHUNKS = Codec(CHUNK_SCHEMA, _chunk_row, _chunk)
REJECTIONS = Codec(REJECTION_SCHEMA, _rejection_row, lambda r: Rejection(**r))

# the names the assets and tests use; table_to_* also read frames
documents_to_table, documents_to_frame = DOCUMENTS.to_table, DOCUMENTS.to_frame
table_to_documents = frame_to_documents = DOCUMENTS.from_table
chunks_to_table, chunks_to_frame = CHUNKS.to_table, CHUNKS.to_frame
table_to_chunks = frame_to_chunks = CHUNKS.from_table
rejections_to_table, rejections_to_frame = REJECTIONS.to_table, REJECTIONS.to_frame
table_to_rejections = frame_to_rejections = REJECTIONS.from_table
