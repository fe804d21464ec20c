"""Data-quality suites for documents and chunks, run with Great Expectations 1.x on DataFrames.

Relational rules (spans inside their document, parents exist, no document lost) become derived
boolean columns first, so every rule is an ordinary GE expectation with counts and examples.
"""

from __future__ import annotations

import json
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


def _validate(suite_name: str, frame: pd.DataFrame, expectations: list[tuple[str, Any]]) -> SuiteOutcome:
    import great_expectations as gx

    if frame.empty:
        return SuiteOutcome(suite_name, 0, [ExpectationOutcome(name, True, 0) for name, _ in expectations])
    batch = _batch_definition().get_batch(batch_parameters={"dataframe": frame})
    suite = gx.ExpectationSuite(name=suite_name, expectations=[e for _, e in expectations])
    result = batch.validate(suite, result_format="SUMMARY")
    outcomes = []
    for (name, _), r in zip(expectations, result.results, strict=True):
        outcomes.append(ExpectationOutcome(name, bool(r.success), int(r.result.get("unexpected_count") or 0),
                                           list(r.result.get("partial_unexpected_list") or [])[:10]))
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
    ])
    lost.outcomes[0].examples = docs.loc[~docs["has_chunks"], "document_id"].head(10).tolist()
    return SuiteOutcome("chunks", len(frame), chunk_outcome.outcomes + lost.outcomes)
