"""Documents, chunks and rejections <-> pyarrow tables and pandas frames with fixed column types, for Parquet.

Nested values travel as JSON strings (metadata, headings, page_starts) or a scope path string, so the
Parquet schema never depends on what metadata a corpus happens to carry. Round trips are exact.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pandas as pd
import pyarrow as pa

from ragloom.types import Chunk, Document, Heading, Rejection, Scope

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


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


def _rows(data: pa.Table | pd.DataFrame, schema: pa.Schema) -> list[dict[str, Any]]:
    if isinstance(data, pd.DataFrame):
        data = pa.Table.from_pandas(data, schema=schema, preserve_index=False)
    return data.select(schema.names).to_pylist()


# documents ---------------------------------------------------------------------------------------------

def documents_to_table(documents: Iterable[Document]) -> pa.Table:
    return _table([{
        "document_id": d.document_id, "title": d.title, "text": d.text, "source_path": d.source_path,
        "format": d.format, "content_hash": d.content_hash, "modified_at": float(d.modified_at),
        "headings": _dumps([[h.level, h.title, h.start, h.end] for h in d.headings]),
        "page_starts": _dumps(list(d.page_starts)), "metadata": _dumps(d.metadata), "scope_path": d.scope.path,
    } for d in documents], DOCUMENT_SCHEMA)


def table_to_documents(data: pa.Table | pd.DataFrame) -> list[Document]:
    return [Document(
        document_id=r["document_id"], title=r["title"], text=r["text"], source_path=r["source_path"],
        format=r["format"], content_hash=r["content_hash"], modified_at=r["modified_at"],
        headings=[Heading(level, title, start, end) for level, title, start, end in json.loads(r["headings"])],
        page_starts=json.loads(r["page_starts"]), metadata=json.loads(r["metadata"]),
        scope=Scope.from_path(r["scope_path"]),
    ) for r in _rows(data, DOCUMENT_SCHEMA)]


def documents_to_frame(documents: Iterable[Document]) -> pd.DataFrame:
    return documents_to_table(documents).to_pandas()


def frame_to_documents(frame: pd.DataFrame) -> list[Document]:
    return table_to_documents(frame)


# chunks ------------------------------------------------------------------------------------------------

def chunks_to_table(chunks: Iterable[Chunk]) -> pa.Table:
    return _table([{
        "chunk_id": c.chunk_id, "document_id": c.document_id, "strategy": c.strategy, "text": c.text,
        "start": c.start, "end": c.end, "token_count": c.token_count, "position": c.position, "level": c.level,
        "parent_id": c.parent_id, "heading_path": list(c.heading_path), "embed_text": c.embed_text,
        "metadata": _dumps(c.metadata), "scope_path": c.scope.path,
    } for c in chunks], CHUNK_SCHEMA)


def table_to_chunks(data: pa.Table | pd.DataFrame) -> list[Chunk]:
    return [Chunk(
        chunk_id=r["chunk_id"], document_id=r["document_id"], strategy=r["strategy"], text=r["text"],
        start=r["start"], end=r["end"], token_count=r["token_count"], position=r["position"], level=r["level"],
        parent_id=r["parent_id"], heading_path=list(r["heading_path"]), embed_text=r["embed_text"],
        metadata=json.loads(r["metadata"]), scope=Scope.from_path(r["scope_path"]),
    ) for r in _rows(data, CHUNK_SCHEMA)]


def chunks_to_frame(chunks: Iterable[Chunk]) -> pd.DataFrame:
    return chunks_to_table(chunks).to_pandas()


def frame_to_chunks(frame: pd.DataFrame) -> list[Chunk]:
    return table_to_chunks(frame)


# rejections --------------------------------------------------------------------------------------------

def rejections_to_table(rejections: Iterable[Rejection]) -> pa.Table:
    return _table([{"source_path": r.source_path, "reason": r.reason, "detail": r.detail} for r in rejections],
                  REJECTION_SCHEMA)


def table_to_rejections(data: pa.Table | pd.DataFrame) -> list[Rejection]:
    return [Rejection(**r) for r in _rows(data, REJECTION_SCHEMA)]


def rejections_to_frame(rejections: Iterable[Rejection]) -> pd.DataFrame:
    return rejections_to_table(rejections).to_pandas()


def frame_to_rejections(frame: pd.DataFrame) -> list[Rejection]:
    return table_to_rejections(frame)
