"""`summaries_<chunking>`: RAPTOR-lite's summary level of a chunking (RAGLOOM_SUMMARY_CHUNKINGS), rebuilt only for
changed sections. Thin: ragloom.indexing.summaries does the work."""


import pandas as pd
from dagster import AssetExecutionContext, AssetIn, AssetsDefinition, MaterializeResult, asset

from assets.stores import _run_sync, store_retry
from ragloom.indexing.compose import index_summaries
from ragloom.indexing.summaries import summary_collection
from ragloom.settings import Settings
from ragloom.tables import frame_to_chunks
from resources import ArtifactStore, EmbedderResource, WeaviateResource, settings_of

# A build that calls the model sits in the pool "llm" (limit 1, dagster.yaml's default): one model-bound
# step at a time, whatever launched it; an extractive build only writes Weaviate, like the vector assets.
LLM_POOL = "llm"


def build_summary_assets(chunking: str, settings: Settings) -> AssetsDefinition:
    uses_llm = settings.summaries_use_llm()

    @asset(name=f"summaries_{chunking}", group_name="ingestion", kinds={"weaviate"},
           ins={"chunks": AssetIn(f"chunks_{chunking}")}, deps=[f"vectors_{chunking}"],
           retry_policy=store_retry(settings),
           pool=LLM_POOL if uses_llm else "weaviate",
           description=f"RAPTOR-lite: a summary per section of the {chunking} chunks ("
                       f"{'written by the configured LLM' if uses_llm else 'extractive'}), in their own collection; "
                       "only changed sections are summarized again.")
    def _summaries(context: AssetExecutionContext, chunks: pd.DataFrame, weaviate: WeaviateResource,
                   embedder: EmbedderResource, artifacts: ArtifactStore) -> MaterializeResult:
        store = weaviate.store()
        report = _run_sync(context, f"summaries_{chunking}", lambda: index_summaries(
            settings_of(weaviate, embedder, artifacts), store, embedder.embedder(), chunking, frame_to_chunks(chunks),
            log=context.log.info, use_llm=uses_llm))
        return MaterializeResult(metadata={**report.as_metadata(),
                                           "collection": store.collection_name(summary_collection(chunking))})

    return _summaries
