"""Evaluate retrieval strategies × chunkings on a dataset folder, against BM25 and dense baselines, in one run.

The corpus goes into its own Weaviate collections and Neo4j namespace (``Eval<Name>`` / ``eval_<name>``
unless given), through the same idempotent sync functions as the pipeline, with the shared embedding
cache: a re-run embeds and extracts nothing new.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragloom.api import Ragloom
from ragloom.chunking import check_chunking_settings, chunker_for
from ragloom.embedding import make_embedder
from ragloom.errors import ConfigError, RagloomError
from ragloom.evaluation.baselines import BM25Baseline, DenseBaseline, baseline_units
from ragloom.evaluation.datasets import EvalDataset, load_dataset
from ragloom.evaluation.metrics import Hit, document_scores, passage_scores
from ragloom.evaluation.report import BASELINE_BM25, BASELINE_DENSE, EvalReport, SystemResult
from ragloom.indexing.compose import embedding_cache, index_chunking
from ragloom.indexing.vectors import encode_cached
from ragloom.query import check_chunking, check_transforms, parse_query
from ragloom.retrieval import options_for, strategy_class
from ragloom.retrieval.postprocess import GRAPH_SOURCE
from ragloom.retrieval.query import check_text
from ragloom.retrieval.routing.monitor import AdaptiveTally, Outcome, outcome
from ragloom.settings import Settings
from ragloom.types import Log

DEFAULT_DEPTH = 30  # chunks retrieved per query; document-level @10 needs 10 distinct documents among them
# Abstaining (an empty answer below a similarity floor) is a product choice, not a ranking: measured off.
DEFAULT_QUERY_OPTIONS: dict[str, Any] = {"abstain": False}


def namespace_settings(settings: Settings, dataset_name: str, namespace: str | None = None) -> Settings:
    """Settings pointing at the evaluation's own collections and graph namespace."""
    if namespace:
        prefix, graph = namespace, namespace
    else:
        words = re.findall(r"[A-Za-z0-9]+", dataset_name) or ["Data"]
        prefix = "Eval" + "".join(w[:1].upper() + w[1:] for w in words)
        graph = "eval_" + "_".join(w.lower() for w in words)
    if not re.fullmatch(r"[A-Z][A-Za-z0-9_]*", prefix):
        raise ConfigError(f"evaluation namespace {prefix!r}: must start with an uppercase letter (a Weaviate "
                          "collection prefix) and hold only letters, digits and '_'")
    return dataclasses.replace(settings, collection_prefix=prefix, graph_namespace=graph)


def _check_names(strategies: Sequence[str], chunkings: Sequence[str]) -> None:
    """Every name known before anything is ingested: the query parser's own error for an unknown one."""
    if not strategies or not chunkings:
        raise ConfigError("evaluation needs at least one retrieval strategy and one chunking")
    for strategy in strategies:
        strategy_class(strategy)
    for chunking in chunkings:
        check_chunking(chunking)


def score_runs(dataset: EvalDataset, runs: dict[str, list[Hit]]) -> dict[str, Any]:
    """level -> metric -> per-query scores of one system's runs."""
    scores = {"document": document_scores(runs, dataset.qrels)}
    if dataset.has_passages:
        scores["passage"] = passage_scores(runs, dataset.passage_qrels, dataset.passages)
    return scores


def _timed_search(search: Callable[[], dict[str, list[Hit]]], n: int) -> tuple[dict[str, list[Hit]], float]:
    started = time.perf_counter()
    runs = search()
    return runs, (time.perf_counter() - started) * 1000 / max(n, 1)


def _baselines(dataset: EvalDataset, encode: Callable[[Sequence[str]], Any], depth: int,
               log: Log) -> list[SystemResult]:
    unit, units = baseline_units(dataset)
    out = []
    for name, build in ((BASELINE_BM25, lambda: BM25Baseline(units)),
                        (BASELINE_DENSE, lambda: DenseBaseline(units, encode))):
        started = time.perf_counter()
        index = build()
        runs, per_query_ms = _timed_search(lambda index=index: index.search(dataset.queries, depth),
                                           len(dataset.queries))
        log(f"baseline {name} over {len(units)} {unit}s: {time.perf_counter() - started:.1f}s")
        out.append(SystemResult(name, unit, baseline=True, scores=score_runs(dataset, runs),
                                latency_ms=[per_query_ms]))
    return out


def evaluate(dataset_path: str, strategies: Sequence[str], chunkings: Sequence[str], settings: Settings,
             namespace: str | None = None, max_queries: int | None = None, corpus_limit: int | None = None,
             *, depth: int = DEFAULT_DEPTH, seed: int = 13, resamples: int = 1000,
             query_options: Mapping[str, Any] | str | None = None, option_pairs: Sequence[str] = (),
             baselines: bool = True, log: Log = print, transforms: Sequence[str] = ()) -> EvalReport:
    """Ingest the dataset (idempotently), run every query through every strategy × chunking, score it.

    ``query_options`` (a mapping or JSON object text) and ``option_pairs`` (``key=value``): retrieval options,
    each given to the strategies that declare it and checked against their declarations before anything runs.

    ``transforms``: each strategy also runs once per query transform, as system ``<strategy>+<transform>``
    (the model ones need RAGLOOM_LLM_*; without a model they are skipped and the system equals the plain one).

    A strategy that fails as a whole (e.g. a combination a retriever refuses) is reported with its error;
    a query that fails counts as retrieving nothing and is counted in ``query_errors``.
    """
    from ragloom.stores.weaviate import WeaviateStore  # deferred: the Weaviate client is slow to import

    strategies, chunkings = list(dict.fromkeys(strategies)), list(dict.fromkeys(chunkings))
    _check_names(strategies, chunkings)
    transforms = list(check_transforms(transforms) or ())
    per_strategy = {name: {**DEFAULT_QUERY_OPTIONS, **given}
                    for name, given in options_for(strategies, query_options, option_pairs).items()}
    if not 10 <= depth:
        raise ConfigError(f"depth={depth}: retrieve at least 10 chunks per query (the metrics' cutoff)")
    dataset = load_dataset(dataset_path, max_queries=max_queries, corpus_limit=corpus_limit, seed=seed)
    if not dataset.queries:
        raise ConfigError(f"{dataset_path}: no queries with relevance judgements")
    eval_settings = namespace_settings(settings, dataset.name, namespace)
    if eval_settings.summary_mode == "auto":  # deterministic by default: extractive unless RAGLOOM_SUMMARY_MODE=llm
        eval_settings = dataclasses.replace(eval_settings, summary_mode="extractive")
    check_chunking_settings(eval_settings)
    log(f"{dataset.name}: {len(dataset.documents)} documents, {len(dataset.queries)} queries; collections "
        f"{eval_settings.collection_prefix}*, graph namespace {eval_settings.graph_namespace!r}")

    embedder = make_embedder(eval_settings)
    # queries and entity names embedded as the API and the graph asset embed them (backend auto may pick another
    # backend of the family for short texts)
    short = make_embedder(eval_settings, short_texts=True)
    encode = _cached_encoder(embedder, embedding_cache(eval_settings))
    systems: list[SystemResult] = _baselines(dataset, encode, depth, log) if baselines else []
    ingest: dict[str, dict[str, Any]] = {}
    needs_graph = any(strategy_class(s).needs_graph for s in strategies)
    needs_summaries = any(strategy_class(s).needs_summaries for s in strategies)

    vectors = WeaviateStore.connect(eval_settings)
    graph = nlp = extractor = None
    try:
        if needs_graph:
            # deferred: spaCy loads only when the graph is built or queried
            from ragloom.extraction import extractor_for

            # deferred: the store's driver loads only when a store is opened
            from ragloom.stores.neo4j import Neo4jStore

            graph = Neo4jStore.connect(eval_settings)
            extractor = extractor_for(eval_settings)
            nlp = extractor.nlp  # query entities come from the same loaded pipeline
        for chunking in chunkings:
            started = time.perf_counter()
            chunks = chunker_for(chunking, embedder, **eval_settings.chunker_params(chunking)).chunk_many(
                dataset.documents)
            chunk_seconds = round(time.perf_counter() - started, 2)
            # the assets' own stages (ragloom.indexing.compose), so the figures come from the code Dagster runs
            done = index_chunking(eval_settings, chunking, chunks, vectors=vectors, embedder=embedder, graph=graph,
                                  extractor=extractor, name_embedder=short, summaries=needs_summaries, log=log)
            report = done.vectors
            ingest[chunking] = {"chunks": len(chunks), "chunk_seconds": chunk_seconds,
                                "vector_seconds": done.seconds["vectors"],
                                "vectors_inserted": report.inserted, "vectors_deleted": report.deleted,
                                "embedded": report.embedded, "cache_hits": report.cache_hits}
            if done.summaries is not None:
                ingest[chunking].update({"summary_seconds": done.seconds["summaries"],
                                         "summary_sections": done.summaries.sections,
                                         "summaries_built": done.summaries.built,
                                         "summary_method": done.summaries.method})
            if done.graph is not None:
                ingest[chunking]["graph_seconds"] = done.seconds["graph"]
                ingest[chunking]["graph_chunks_added"] = done.graph.chunks_added
            log(f"ingested {chunking}: {ingest[chunking]}")

        with Ragloom(eval_settings, vectors=vectors, graph=graph, embedder=short, nlp=nlp) as rag:
            for chunking in chunkings:
                for strategy in strategies:
                    options = per_strategy[strategy]
                    systems.append(_run_strategy(rag, dataset, strategy, chunking, depth, options, log))
                    for transform in transforms:
                        systems.append(_run_strategy(rag, dataset, strategy, chunking, depth, options, log,
                                                     transform))
    finally:
        vectors.close()
        if graph is not None:
            graph.close()

    levels = ["document", "passage"] if dataset.has_passages else ["document"]
    query_ids = {"document": sorted(dataset.qrels)}
    if dataset.has_passages:
        query_ids["passage"] = sorted(dataset.passage_qrels)
    return EvalReport(
        dataset=dataset.name, levels=levels, query_ids=query_ids, systems=systems, documents=len(dataset.documents),
        ingest=ingest, resamples=resamples, seed=seed,
        config={"dataset_path": str(dataset_path), "strategies": strategies, "chunkings": chunkings,
                "max_queries": max_queries, "corpus_limit": corpus_limit, "depth": depth, "seed": seed,
                "query_options": per_strategy, "transforms": transforms,
                "collection_prefix": eval_settings.collection_prefix,
                "graph_namespace": eval_settings.graph_namespace, "embed_model": embedder.model_id},
    )



def _run_strategy(rag: Any, dataset: EvalDataset, strategy: str, chunking: str, depth: int,
                  options: dict[str, Any], log: Log, transform: str | None = None) -> SystemResult:
    result = SystemResult(strategy if transform is None else f"{strategy}+{transform}", chunking)
    try:
        base = parse_query(text=dataset.queries[0].text, strategy=strategy, chunking=chunking, k=depth,
                           options=options, transforms=[] if transform is None else [transform])
        rag.retriever(base.strategy, base.chunking)  # a combination the retriever refuses fails here, once
    except RagloomError as e:
        result.error = str(e)
        log(f"{result.name}: cannot run: {e}")
        return result
    runs: dict[str, list[Hit]] = {}
    outcomes: dict[str, Outcome] = {}
    first_error = ""
    transform_errors = 0
    for query in dataset.queries:
        started = time.perf_counter()
        try:
            found = rag.retrieve(base.replace(text=check_text(query.text)))
            if transform is not None:
                transform_errors += bool(found.metadata.details["transforms"][transform]["error"])
            items = found.items
            adaptive = outcome(found.metadata.details)
            if adaptive is not None:
                outcomes[query.query_id] = adaptive
        except RagloomError as e:
            result.query_errors += 1
            first_error = first_error or str(e)
            items = []
        result.latency_ms.append((time.perf_counter() - started) * 1000)
        runs[query.query_id] = hits_of(items)
    if result.query_errors == len(dataset.queries):
        result.error = f"every query failed: {first_error}"
    else:
        result.scores = score_runs(dataset, runs)
    if outcomes:
        tally = adaptive_tally(dataset, outcomes)
        result.adaptive = tally.as_dict()
        log(f"{result.name}: {tally.describe()}")
    log(f"{result.name}: {len(dataset.queries)} queries, {result.query_errors} errors" +
        (f" (first: {first_error})" if first_error else "") +
        (f"; the transform produced nothing for {transform_errors}" if transform_errors else ""))
    return result


def adaptive_tally(dataset: EvalDataset, outcomes: Mapping[str, Outcome], metric: str = "ndcg@10") -> AdaptiveTally:
    """The adaptive strategy's mix and retry rate over the queries, each retried query judged by the document
    ``metric`` of the try returned minus that of the first try (both over the tries' own first documents)."""
    retried = {q: o for q, o in outcomes.items() if o.retried and q in dataset.qrels}
    gains: dict[str, float] = {}
    if retried:
        qrels = {q: dataset.qrels[q] for q in retried}
        first = document_scores({q: [Hit(d, d) for d in o.first_documents] for q, o in retried.items()}, qrels)
        used = document_scores({q: [Hit(d, d) for d in o.used_documents] for q, o in retried.items()}, qrels)
        gains = dict(zip(sorted(qrels), (used[metric] - first[metric]).tolist(), strict=True))
    tally = AdaptiveTally()
    for query_id, found in outcomes.items():
        tally.add(found, gains.get(query_id))
    return tally


def hits_of(items: Sequence[Any]) -> list[Hit]:
    """Retrieved chunks as hits, in rank order. graph_rag's context item (the visited subgraph, not a chunk of
    any document) is left out: it is context for a reader, not a ranked result."""

    hits = []
    for item in items:
        if item.metadata.get("source") == GRAPH_SOURCE:
            continue
        start, end = item.metadata.get("start"), item.metadata.get("end")
        if start is None or end is None:
            raise ConfigError(f"retrieved chunk {item.chunk_id} carries no start/end offsets in its metadata")
        tokens = int(item.metadata.get("token_count") or 0)
        hits.append(Hit(item.chunk_id, item.document_id, int(start), int(end), tokens))
    return hits


def _cached_encoder(embedder: Any, cache: Any) -> Callable[[Sequence[str]], Any]:
    """``embedder.encode`` through the shared embedding cache (the baselines' whole documents are re-used)."""
    return lambda texts: encode_cached(embedder, cache, list(texts))[0]


def drop_namespace(settings: Settings, dataset_name: str, namespace: str | None = None) -> list[str]:
    """Delete an evaluation's collections and graph namespace; returns what was removed."""
    from ragloom.stores.neo4j import Neo4jStore  # deferred: the store's driver loads only when a store is opened
    from ragloom.stores.weaviate import WeaviateStore  # deferred: as above

    eval_settings = namespace_settings(settings, dataset_name, namespace)
    with WeaviateStore.connect(eval_settings) as store:
        removed = store.drop_collections()
    with Neo4jStore.connect(eval_settings) as graph:
        graph.clear()
    return [*removed, f"graph:{eval_settings.graph_namespace}"]
