"""Data-quality suites for every stage, run with Great Expectations 1.x on DataFrames.

Documents and chunks are checked row by row. The stores are checked against the chunk table: one row
per chunk id (stored? current?), the vector dimension, and the graph's own counts of broken records
(computed by Cypher in the database, where the graph is). Relational rules become derived boolean
columns first, so every rule is an ordinary GE expectation with counts and examples (ids, where rows
have one).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import pandas as pd


@dataclass
class ExpectationOutcome:
    name: str
    success: bool
    unexpected_count: int
    examples: list[Any] = field(default_factory=list)


@dataclass
class SuiteOutcome:
    suite: str
    rows: int
    outcomes: list[ExpectationOutcome]

    @property
    def success(self) -> bool:
        return all(o.success for o in self.outcomes)

    def failed(self) -> list[ExpectationOutcome]:
        return [o for o in self.outcomes if not o.success]

    def as_metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rows": self.rows}
        for o in self.outcomes:
            out[f"{o.name}: unexpected"] = o.unexpected_count
        return out


@lru_cache(maxsize=1)
def _batch_definition():
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    source = context.data_sources.add_pandas("ragloom")
    return source.add_dataframe_asset("frame").add_batch_definition_whole_dataframe("whole")


def _validate(suite_name: str, frame: pd.DataFrame, expectations: list[tuple[str, Any]],
              id_column: str | None = None) -> SuiteOutcome:
    """Run the expectations on ``frame``; examples are the ``id_column`` values of failing rows, if given,
    else the failing values."""
    import great_expectations as gx

    if frame.empty:
        return SuiteOutcome(suite_name, 0, [ExpectationOutcome(name, True, 0) for name, _ in expectations])
    batch = _batch_definition().get_batch(batch_parameters={"dataframe": frame})
    suite = gx.ExpectationSuite(name=suite_name, expectations=[e for _, e in expectations])
    result_format: dict[str, Any] = {"result_format": "SUMMARY"}
    if id_column:
        result_format["unexpected_index_column_names"] = [id_column]
    result = batch.validate(suite, result_format=result_format)
    outcomes = []
    for (name, _), r in zip(expectations, result.results, strict=True):
        if id_column:
            examples = [row[id_column] for row in r.result.get("partial_unexpected_index_list") or []]
        else:
            examples = list(r.result.get("partial_unexpected_list") or [])
        outcomes.append(ExpectationOutcome(name, bool(r.success), int(r.result.get("unexpected_count") or 0),
                                           examples[:10]))
    return SuiteOutcome(suite_name, len(frame), outcomes)


def check_documents(documents: pd.DataFrame) -> SuiteOutcome:
    import great_expectations.expectations as gxe

    return _validate("documents", documents, [
        ("unique document ids", gxe.ExpectColumnValuesToBeUnique(column="document_id")),
        ("text not empty", gxe.ExpectColumnValueLengthsToBeBetween(column="text", min_value=1)),
        ("content hash present", gxe.ExpectColumnValuesToNotBeNull(column="content_hash")),
    ])


def check_chunks(chunks: pd.DataFrame, documents: pd.DataFrame, max_tokens: int) -> SuiteOutcome:
    """Chunk rules, including the relational ones against the documents they came from."""
    import great_expectations.expectations as gxe

    doc_length = dict(zip(documents["document_id"], documents["text"].map(len), strict=True))
    frame = chunks[["chunk_id", "document_id", "text", "token_count", "start", "end", "parent_id"]].copy()
    # Hierarchical upper levels may be longer than the model reads by design: they are stored whole and
    # embedded truncated (metadata embed_truncated). Everything else must fit the model.
    truncated = chunks["metadata"].map(lambda m: bool(json.loads(m).get("embed_truncated"))) \
        if "metadata" in chunks else pd.Series(False, index=chunks.index)
    frame["fits_model"] = (frame["token_count"] <= max_tokens) | truncated
    lengths = frame["document_id"].map(doc_length).astype("float64")
    frame["span_inside_document"] = (frame["start"] >= 0) & (frame["end"] <= lengths.fillna(-1)) & (
        frame["start"] < frame["end"])
    ids = set(frame["chunk_id"])
    frame["parent_exists"] = frame["parent_id"].isna() | frame["parent_id"].isin(ids) | (frame["parent_id"] == "")
    # a document with any non-whitespace text must keep at least one chunk
    covered = set(frame["document_id"])
    docs = documents[["document_id", "text"]].copy()
    docs["has_chunks"] = docs["document_id"].isin(covered) | (docs["text"].str.strip() == "")

    chunk_outcome = _validate("chunks", frame, [
        ("unique chunk ids", gxe.ExpectColumnValuesToBeUnique(column="chunk_id")),
        ("text not empty", gxe.ExpectColumnValueLengthsToBeBetween(column="text", min_value=1)),
        ("token count positive", gxe.ExpectColumnValuesToBeBetween(column="token_count", min_value=1)),
        ("token count within model limit", gxe.ExpectColumnValuesToBeInSet(column="fits_model", value_set=[True])),
        ("span inside its document", gxe.ExpectColumnValuesToBeInSet(column="span_inside_document", value_set=[True])),
        ("parent id exists", gxe.ExpectColumnValuesToBeInSet(column="parent_exists", value_set=[True])),
    ])
    lost = _validate("documents kept", docs, [
        ("no document lost between parse and chunk",
         gxe.ExpectColumnValuesToBeInSet(column="has_chunks", value_set=[True])),
    ], id_column="document_id")
    return SuiteOutcome("chunks", len(frame), chunk_outcome.outcomes + lost.outcomes)


def _ids_against_current(current_ids: Collection[str], stored_ids: Collection[str]) -> pd.DataFrame:
    """One row per chunk id current or stored, with whether it is each."""
    current, stored = set(current_ids), set(stored_ids)
    frame = pd.DataFrame({"chunk_id": sorted(current | stored)}, dtype=object)
    frame["stored"] = frame["chunk_id"].isin(stored)
    frame["current"] = frame["chunk_id"].isin(current)
    return frame


def check_vectors(current_ids: Collection[str], stored_ids: Collection[str], dimension: int | None,
                  expected_dimension: int) -> SuiteOutcome:
    """A Weaviate collection against the chunk table: every current chunk is stored and nothing else is;
    a stored vector (``dimension``: one's length, None when there is none) has the model's dimension."""
    import great_expectations.expectations as gxe

    ids = _validate("vectors", _ids_against_current(current_ids, stored_ids), [
        ("every current chunk is stored", gxe.ExpectColumnValuesToBeInSet(column="stored", value_set=[True])),
        ("nothing else is stored", gxe.ExpectColumnValuesToBeInSet(column="current", value_set=[True])),
    ], id_column="chunk_id")
    # No vector is fine only for an empty chunk set; otherwise it counts as dimension 0.
    sample = pd.DataFrame({"dimension": [] if dimension is None and not current_ids else [dimension or 0]},
                          dtype="int64")
    dim = _validate("vector dimension", sample, [
        ("vector dimension is the model's",
         gxe.ExpectColumnValuesToBeInSet(column="dimension", value_set=[expected_dimension])),
    ])
    return SuiteOutcome("vectors", ids.rows, ids.outcomes + dim.outcomes)


def check_graph(current_ids: Collection[str], graph_ids: Collection[str], empty_entity_names: int,
                dangling_mentions: int) -> SuiteOutcome:
    """A Neo4j graph against the chunk table: every chunk in the graph is current; and the graph's own
    counts of entities without a name and of MENTIONS not starting at a chunk of the namespace are 0."""
    import great_expectations.expectations as gxe

    chunks = _ids_against_current(current_ids, graph_ids)
    ids = _validate("graph chunks", chunks[chunks["stored"]], [
        ("every chunk in the graph is current", gxe.ExpectColumnValuesToBeInSet(column="current", value_set=[True])),
    ], id_column="chunk_id")
    counts = _validate("graph records", pd.DataFrame({"empty_entity_names": [empty_entity_names],
                                                      "dangling_mentions": [dangling_mentions]}), [
        ("no empty entity names", gxe.ExpectColumnValuesToBeBetween(column="empty_entity_names", max_value=0)),
        ("no dangling mentions", gxe.ExpectColumnValuesToBeBetween(column="dangling_mentions", max_value=0)),
    ])
    return SuiteOutcome("graph", ids.rows, ids.outcomes + counts.outcomes)
