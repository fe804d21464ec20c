"""The `documents` asset: every source file parsed once into a normalized record (Parquet)."""


from collections import Counter

import pandas as pd
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    MetadataValue,
    Output,
    asset,
    asset_check,
)

from assets._metadata import markdown_table, suite_check
from ragloom.ingest import collect_documents
from ragloom.quality import check_documents
from ragloom.tables import documents_to_frame, rejections_to_frame
from resources import ArtifactStore, CorpusResource


@asset(group_name="ingestion", kinds={"python", "parquet"},
       description="Documents folder + uploads parsed once (Markdown, text, HTML, PDF, JSONL, Word, PowerPoint, "
                   "Excel, CSV, email); bad files are rejected with path and reason, the rest go on.")
def documents(context: AssetExecutionContext, corpus: CorpusResource, artifacts: ArtifactStore) -> Output[pd.DataFrame]:
    collected = collect_documents(corpus.sources(), artifacts.read("documents"), log=context.log.info,
                                  limits=corpus.parse_limits(), metadata=corpus.metadata_layout())
    frame = documents_to_frame(collected.documents)
    rejected = rejections_to_frame(collected.rejections)
    artifacts.write("rejected_documents", rejected)
    for r in collected.rejections:
        context.log.warning(f"rejected {r.source_path}: {r.reason} ({r.detail})")
    formats = Counter(d.format for d in collected.documents)
    return Output(frame, metadata={
        "documents": len(frame),
        "new": len(collected.new),
        "changed": len(collected.changed),
        "unchanged": len(collected.unchanged),
        "removed (tombstones)": len(collected.removed),
        "rejected": len(collected.rejections),
        "rejected_files": markdown_table([r.__dict__ for r in collected.rejections],
                                         ["source_path", "reason", "detail"]),
        "by_format": MetadataValue.json(dict(formats)),
        "preview": markdown_table(frame.head(10).assign(chars=frame["text"].str.len()).to_dict("records")
                                  if len(frame) else [], ["document_id", "title", "format", "chars", "scope_path"]),
        "parse_seconds": round(collected.seconds, 2),
    })


@asset_check(asset=documents, blocking=True, description="Great Expectations: unique ids, non-empty text, hashes")
def documents_quality(documents: pd.DataFrame) -> AssetCheckResult:
    return suite_check(check_documents(documents))


@asset_check(asset=documents, description="Warns when any source file was rejected (see rejected_files)")
def no_rejected_files(artifacts: ArtifactStore) -> AssetCheckResult:
    rejected = artifacts.read("rejected_documents")
    count = 0 if rejected is None else len(rejected)
    rows = [] if rejected is None else rejected.to_dict("records")
    return AssetCheckResult(passed=count == 0, severity=AssetCheckSeverity.WARN,
                            metadata={"rejected": count,
                                      "files": markdown_table(rows, ["source_path", "reason", "detail"])})
