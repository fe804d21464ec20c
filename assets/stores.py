"""`vectors_<chunking>` (Weaviate) and `graph_<chunking>` (Neo4j): sync each store to the current chunks.

Both syncs are idempotent and diff against what the store holds, so a re-run after a failure
completes the work without duplicates. Store errors are retried with backoff (RetryPolicy); bad
data fails at once (Failure with allow_retries=False).
"""


from collections.abc import Callable
from typing import Any

import pandas as pd
from dagster import (
    AssetCheckResult,
    AssetChecksDefinition,
    AssetExecutionContext,
    AssetIn,
    AssetsDefinition,
    Backoff,
    Failure,
    Jitter,
    MaterializeResult,
    RetryPolicy,
    asset,
    asset_check,
)

from assets._metadata import histogram_png, markdown_table, suite_check
from ragloom.errors import RagloomError, StoreError
from ragloom.indexing.compose import index_graph, index_vectors
from ragloom.indexing.graph import check_graph
from ragloom.indexing.vectors import check_vectors
from ragloom.settings import Settings
from ragloom.tables import frame_to_chunks
from resources import ArtifactStore, EmbedderResource, Neo4jResource, NlpResource, WeaviateResource, settings_of


def store_retry(settings: Settings) -> RetryPolicy:
    """Store-writing steps retry a store error 3 times, after RAGLOOM_STORE_RETRY_DELAY_SECONDS, then twice and
    four times that (with jitter): ~35 s of outage ridden out at the default 5 s."""
    return RetryPolicy(max_retries=3, delay=settings.store_retry_delay_seconds, backoff=Backoff.EXPONENTIAL,
                       jitter=Jitter.PLUS_MINUS)


# Store-writing assets sit in the pools "weaviate" and "neo4j" (limit 1 each in dagster.yaml), so two
# runs never write the same store at once, whoever launched them; ingest runs also carry this tag.
STORE_WRITER_TAGS = {"ragloom/store-writer": "true"}


def _run_sync(context: AssetExecutionContext, what: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except StoreError:
        context.log.error(f"{what}: store error; the run will be retried, and a re-run resumes where this stopped")
        raise
    except RagloomError as e:
        raise Failure(description=f"{what}: {e}", allow_retries=False) from e


def build_vector_assets(chunking: str, settings: Settings) -> tuple[AssetsDefinition, AssetChecksDefinition]:
    chunks_name = f"chunks_{chunking}"

    @asset(name=f"vectors_{chunking}", group_name="ingestion", kinds={"weaviate"}, ins={"chunks": AssetIn(chunks_name)},
           retry_policy=store_retry(settings), pool="weaviate",
           description=f"Weaviate collection of the {chunking} chunks: embeds new chunks (cached), deletes "
                       "chunks of changed or removed documents.")
    def _vectors(context: AssetExecutionContext, chunks: pd.DataFrame, weaviate: WeaviateResource,
                 embedder: EmbedderResource, artifacts: ArtifactStore) -> MaterializeResult:
        store = weaviate.store()
        model = embedder.embedder()
        settings = settings_of(weaviate, embedder, artifacts)
        report = _run_sync(context, f"vectors_{chunking}", lambda: index_vectors(
            settings, store, model, chunking, frame_to_chunks(chunks), log=context.log.info))
        return MaterializeResult(metadata={
            **report.as_metadata(),
            "collection": store.collection_name(chunking),
            "model": model.model_id,
        })

    @asset_check(asset=_vectors, name=f"vectors_{chunking}_match_chunks",
                 additional_ins={"chunks": AssetIn(chunks_name)},
                 description="Great Expectations: every current chunk id is in Weaviate and nothing else is; "
                             "vector dimension matches")
    def _check(chunks: pd.DataFrame, weaviate: WeaviateResource, embedder: EmbedderResource) -> AssetCheckResult:
        dimension = embedder.embedder(short_texts=True).dimension  # one family: the lighter model to load
        return suite_check(check_vectors(weaviate.store(), chunking, set(chunks["chunk_id"]), dimension),
                           expected=len(chunks), expected_dimension=dimension)

    return _vectors, _check


def build_graph_assets(chunking: str, settings: Settings) -> tuple[AssetsDefinition, AssetChecksDefinition]:
    chunks_name = f"chunks_{chunking}"

    @asset(name=f"graph_{chunking}", group_name="ingestion", kinds={"neo4j"}, ins={"chunks": AssetIn(chunks_name)},
           retry_policy=store_retry(settings), pool="neo4j",
           description=f"Neo4j graph of the {chunking} chunks: spaCy entities, mentions and relations, "
                       "extracted for new chunks only (new entities get a name embedding and synonym edges); "
                       "removed chunks' evidence is withdrawn.")
    def _graph(context: AssetExecutionContext, chunks: pd.DataFrame, neo4j: Neo4jResource,
               nlp: NlpResource, embedder: EmbedderResource) -> MaterializeResult:
        store = neo4j.store()
        settings = settings_of(neo4j, nlp, embedder)
        report = _run_sync(context, f"graph_{chunking}", lambda: index_graph(
            settings, store, nlp.extractor(), embedder.embedder(short_texts=True), chunking, frame_to_chunks(chunks),
            log=context.log.info))
        stats = store.stats()
        top = stats.get("top_entities", [])
        return MaterializeResult(metadata={
            **report.as_metadata(),
            **{k: v for k, v in stats.items() if isinstance(v, (int, float))},
            "top_entities": markdown_table(top, list(top[0].keys()) if top else []),
            "degree_histogram": histogram_png(stats.get("degrees", []) or [0], f"{chunking}: entity degree",
                                              "relations per entity"),
        })

    @asset_check(asset=_graph, name=f"graph_{chunking}_consistent", additional_ins={"chunks": AssetIn(chunks_name)},
                 description="Great Expectations: every chunk in Neo4j is in the current chunk set; no empty "
                             "entity names; every MENTIONS starts at a chunk of the namespace")
    def _check(chunks: pd.DataFrame, neo4j: Neo4jResource) -> AssetCheckResult:
        return suite_check(check_graph(neo4j.store(), chunking, set(chunks["chunk_id"])))

    return _graph, _check
