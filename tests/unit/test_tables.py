"""Documents, chunks and rejections survive pandas, pyarrow and Parquet exactly, with fixed column types."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.chunking import get_chunker
from ragloom.parsing import parse_sources
from ragloom.settings import SAMPLE_CORPUS
from ragloom.tables import (
    CHUNK_SCHEMA,
    DOCUMENT_SCHEMA,
    REJECTION_SCHEMA,
    chunks_to_frame,
    chunks_to_table,
    documents_to_frame,
    documents_to_table,
    frame_to_chunks,
    frame_to_documents,
    frame_to_rejections,
    rejections_to_frame,
    rejections_to_table,
    table_to_chunks,
    table_to_documents,
    table_to_rejections,
)
from ragloom.types import Chunk, Document, Heading, Rejection, Scope


@pytest.fixture(scope="module")
def documents() -> list[Document]:
    docs = parse_sources([SAMPLE_CORPUS], SAMPLE_CORPUS).documents
    # one scoped document so scope paths are exercised, not only the shared scope
    docs[0] = replace(docs[0], scope=Scope("acme", "alice", "chat-1", "bot"))
    return docs


@pytest.fixture(scope="module")
def chunks(documents) -> list[Chunk]:
    return get_chunker("hierarchical").chunk_many(documents)  # has parent ids, levels and None parents


def test_documents_round_trip_through_parquet(tmp_path, documents):
    assert any(d.page_starts for d in documents) and any(d.headings for d in documents)
    table = documents_to_table(documents)
    assert table.schema == DOCUMENT_SCHEMA
    pq.write_table(table, tmp_path / "documents.parquet")
    assert table_to_documents(pq.read_table(tmp_path / "documents.parquet")) == documents
    frame = documents_to_frame(documents)
    frame.to_parquet(tmp_path / "documents_frame.parquet")
    assert frame_to_documents(pd.read_parquet(tmp_path / "documents_frame.parquet")) == documents
    assert frame_to_documents(frame) == documents


def test_chunks_round_trip_through_parquet(tmp_path, chunks):
    assert any(c.parent_id is None for c in chunks) and any(c.parent_id for c in chunks)
    table = chunks_to_table(chunks)
    assert table.schema == CHUNK_SCHEMA
    assert table.schema.field("heading_path").type == pa.list_(pa.string())
    pq.write_table(table, tmp_path / "chunks.parquet")
    assert table_to_chunks(pq.read_table(tmp_path / "chunks.parquet")) == chunks
    frame = chunks_to_frame(chunks)
    frame.to_parquet(tmp_path / "chunks_frame.parquet")
    assert frame_to_chunks(pd.read_parquet(tmp_path / "chunks_frame.parquet")) == chunks


def test_frames_have_columns_checks_can_use(chunks):
    frame = chunks_to_frame(chunks)
    assert frame["token_count"].dtype == "int64" and frame["start"].dtype == "int64"
    assert frame["parent_id"].isna().sum() == sum(c.parent_id is None for c in chunks)
    assert frame["chunk_id"].is_unique
    assert list(frame["heading_path"].iloc[1]) == chunks[1].heading_path


def test_rejections_round_trip():
    rejections = [Rejection("a/b.pdf", "corrupt", "EOF marker not found"), Rejection("c.jsonl", "malformed", "")]
    assert rejections_to_table(rejections).schema == REJECTION_SCHEMA
    assert table_to_rejections(rejections_to_table(rejections)) == rejections
    assert frame_to_rejections(rejections_to_frame(rejections)) == rejections


def test_empty_inputs_keep_their_schema():
    assert documents_to_table([]).schema == DOCUMENT_SCHEMA and table_to_documents(documents_to_table([])) == []
    assert chunks_to_table([]).schema == CHUNK_SCHEMA and frame_to_chunks(chunks_to_frame([])) == []
    assert list(rejections_to_frame([]).columns) == ["source_path", "reason", "detail"]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
SCOPES = st.sampled_from([Scope(), Scope("acme"), Scope("acme", "u"), Scope("acme", "u", "c"),
                          Scope("acme", "u", "c", "agent")])


@settings(max_examples=50, deadline=None)
@given(text=st.text(min_size=1, max_size=50), metadata=st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=4),
       scope=SCOPES, parent=st.none() | st.text(min_size=1, max_size=32),
       path=st.lists(st.text(max_size=12), max_size=4), modified=st.floats(0, 2e9))
def test_round_trip_is_exact_for_any_values(text, metadata, scope, parent, path, modified):
    doc = Document(document_id="d", title=text, text=text, source_path="p", format="text", content_hash="h",
                   modified_at=modified, headings=[Heading(1, text, 0, len(text))], page_starts=[0],
                   metadata=metadata, scope=scope)
    chunk = Chunk(chunk_id="c", document_id="d", strategy="recursive", text=text, start=0, end=len(text),
                  token_count=3, position=0, level=1, parent_id=parent, heading_path=path, embed_text="p " + text,
                  metadata=metadata, scope=scope)
    assert frame_to_documents(documents_to_frame([doc])) == [doc]
    assert frame_to_chunks(chunks_to_frame([chunk])) == [chunk]
