"""`chunks_<chunking>` assets: one per chunking, re-chunking only new and changed documents."""


import pandas as pd
from dagster import (
    AssetCheckResult,
    AssetChecksDefinition,
    AssetExecutionContext,
    AssetIn,
    AssetsDefinition,
    Output,
    asset,
    asset_check,
)

from assets._metadata import histogram_png, markdown_table, suite_check
from ragloom.chunking import chunker_for
from ragloom.chunking.tokens import get_token_counter
from ragloom.ingest import chunk_incremental
from ragloom.quality import check_chunks
from ragloom.tables import frame_to_documents
from resources import ArtifactStore, EmbedderResource, settings_of


def build_chunk_assets(chunking: str) -> tuple[AssetsDefinition, AssetChecksDefinition]:
    name = f"chunks_{chunking}"

    @asset(name=name, group_name="ingestion", kinds={"python", "parquet"}, ins={"documents": AssetIn()},
           description=f"Chunks of every document by the {chunking} chunker; unchanged documents keep "
                       "their chunks from the last run.")
    def _chunks(context: AssetExecutionContext, documents: pd.DataFrame, artifacts: ArtifactStore,
                embedder: EmbedderResource) -> Output[pd.DataFrame]:
        # loads the model only for a chunker that embeds; RAGLOOM_CHUNKER_OPTIONS gives the chunker's options
        chunker = chunker_for(chunking, embedder.embedder, **settings_of(artifacts, embedder).chunker_params(chunking))
        outcome = chunk_incremental(frame_to_documents(documents), artifacts.read(name), chunker,
                                    log=context.log.info)
        frame = outcome.frame
        per_doc = frame.groupby("document_id").size() if len(frame) else pd.Series(dtype=int)
        context.log.info(f"{chunking}: {outcome.documents_chunked} documents chunked, "
                         f"{outcome.documents_reused} reused, {len(frame)} chunks")
        return Output(frame, metadata={
            "chunks": len(frame),
            "documents_chunked": outcome.documents_chunked,
            "documents_reused": outcome.documents_reused,
            "chunks_new": outcome.chunks_new,
            "chunk_seconds": round(outcome.seconds, 2),
            "mean_tokens": float(frame["token_count"].mean()) if len(frame) else 0.0,
            "max_tokens": int(frame["token_count"].max()) if len(frame) else 0,
            "chunks_per_document_max": int(per_doc.max()) if len(per_doc) else 0,
            "token_histogram": histogram_png(frame["token_count"].tolist(), f"{chunking}: tokens per chunk",
                                             "tokens") if len(frame) else markdown_table([], []),
            "preview": markdown_table(frame.head(8).to_dict("records"),
                                      ["chunk_id", "document_id", "level", "token_count", "heading_path", "text"]),
        })

    @asset_check(asset=_chunks, name=f"{name}_quality", blocking=True, additional_ins={"documents": AssetIn()},
                 description="Great Expectations: unique ids, non-empty text, token limit, spans inside the "
                             "document, parents exist, no document lost")
    def _quality(context, documents: pd.DataFrame, artifacts: ArtifactStore) -> AssetCheckResult:
        chunks = artifacts.read(name)
        return suite_check(check_chunks(chunks, documents, max_tokens=get_token_counter().max_tokens))

    return _chunks, _quality
