"""The query job: runs retrieval against what was materialized, apart from the ingestion graph."""


import json
from pathlib import Path
from typing import Any

import pandas as pd
from dagster import Config, MetadataValue, OpExecutionContext, Output, in_process_executor, job, op
from pydantic import Field

from assets._metadata import markdown_table
from pipelines._launchpad import inside
from ragloom.errors import ConfigError
from ragloom.settings import REPO_ROOT
from ragloom.types import HEADING_SEPARATOR
from resources import ArtifactStore, EmbedderResource, Neo4jResource, NlpResource, WeaviateResource, settings_of


class QueryConfig(Config):
    query: str = Field(default="Who leads the team that owns the HarborSight platform?",
                       description="One query (ignored if queries_file)")
    queries_file: str = Field(default="", description="A file with one query per line (or JSONL with 'text')")
    strategy: str = Field(default="hybrid", description="A retrieval strategy: any registered one (`ragloom "
                                                        "strategies` lists them); an unknown name fails the run")
    k: int = Field(default=5, description="Results per query")
    filters: str = Field(default="", description='Metadata filter as JSON, e.g. {"status": "published"}')
    scope: str = Field(default="", description="Scope path tenant/user/chat[/agent]; empty = shared only")
    chunking: str = Field(default="", description="Which chunking's collection to query; empty = the strategy's own "
                                                  "(hierarchical for hierarchical, else recursive)")
    options: dict[str, Any] = Field(default_factory=dict, description="The strategy's options, e.g. {alpha: 0.3, "
                                    "dedup: false}; `ragloom strategies` lists each with its default and range")
    transforms: str = Field(default="", description="Query transforms, comma-separated: reformulate, multi_query, "
                                                    "hyde, step_back, decompose, prf (model ones need RAGLOOM_LLM_*)")
    answer: bool = Field(default=False, description="Also answer each query with citations (RAGLOOM_LLM_*; with no "
                                                    "model configured the answer says so)")
    generation: str = Field(default="simple", description="Answers: simple | cot | reflect")
    use_cache: bool = Field(default=True, description="Answers: read and write the answer cache")
    profile: str = Field(default="", description="An agent profile (RAGLOOM_AGENT_PROFILES; `ragloom profiles` "
                                                 "lists them): the fields left at their default take the profile's")


def _load_queries(config: QueryConfig, artifacts: ArtifactStore) -> list[str]:
    """The queries to run. A queries_file must lie in the artifacts folder or the repository: the Launchpad
    must not turn any file the process can read into queries echoed back in the results."""
    if not config.queries_file:
        return [config.query]
    path = Path(config.queries_file).resolve()
    roots = [artifacts.root.resolve(), REPO_ROOT]
    if not inside(path, roots):
        raise ConfigError(f"queries_file {config.queries_file!r} is outside the allowed folders "
                          f"({', '.join(map(str, roots))})")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"queries_file {config.queries_file!r} cannot be read: {e}") from e
    queries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if not line.lstrip().startswith("{"):
            queries.append(line.strip())
            continue
        try:
            record = json.loads(line)
            queries.append(str(record["text"]))
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"queries_file line {number}: expected plain text or JSON with a 'text' key "
                              f"({type(e).__name__})") from e
    return queries


ROW_COLUMNS = ["query", "rank", "score", "document_id", "chunk_id", "heading_path", "text", "strategy", "chunking",
               "fallbacks", "abstained"]


def result_rows(query: str, items: list, metadata: Any) -> list[dict[str, Any]]:
    """One row per item (``metadata``: the result's ``ResultInfo``); a query that abstained (or found nothing)
    leaves one row saying so in ``text``."""
    common = {"query": query, "strategy": metadata.strategy, "chunking": metadata.chunking,
              "fallbacks": ",".join(metadata.fallbacks), "abstained": metadata.abstained}
    if not items:
        why = metadata.abstain_reason or "no results"
        return [{**common, "rank": 0, "score": None, "document_id": "", "chunk_id": "", "heading_path": "",
                 "text": f"(abstained: {why})" if common["abstained"] else f"({why})"}]
    return [{**common, "rank": item.rank, "score": round(item.score, 4), "document_id": item.document_id,
             "chunk_id": item.chunk_id, "heading_path": HEADING_SEPARATOR.join(item.heading_path), "text": item.text}
            for item in items]


def adaptive_metadata(tally: Any) -> dict[str, Any]:
    """The adaptive strategy's mix and retry rate (ragloom.retrieval.routing.monitor) as run metadata; none for
    others."""
    if not tally.queries:
        return {}
    from ragloom.retrieval.routing import monitor

    counts = tally.as_dict()
    return {"adaptive": MetadataValue.json(counts), "adaptive_retry_rate": float(round(tally.retry_rate, 4)),
            "adaptive_summary": monitor.describe(counts)}


def _query_fields(config: QueryConfig) -> dict[str, Any]:
    """The run config as query fields; with a profile, a field left at its default is left out (the profile's
    value, else the parser's default, applies)."""
    fields = {"strategy": config.strategy, "k": config.k, "filters": config.filters or None,
              "scope": config.scope or None, "chunking": config.chunking or None, "options": config.options,
              "transforms": config.transforms, "generation": config.generation if config.answer else None,
              "use_cache": config.use_cache, "profile": config.profile or None}
    if config.profile:
        defaults = QueryConfig(profile=config.profile)
        fields = {name: value for name, value in fields.items()
                  if name == "profile" or getattr(defaults, name) != getattr(config, name)}
    return {name: value for name, value in fields.items() if value is not None}


@op(description="Runs every query and writes the results as Parquet and JSON")
def run_queries(context: OpExecutionContext, config: QueryConfig, weaviate: WeaviateResource, neo4j: Neo4jResource,
                embedder: EmbedderResource, nlp: NlpResource, artifacts: ArtifactStore) -> Output[str]:
    from ragloom.api import Ragloom
    from ragloom.query import load_profiles, parse_query
    from ragloom.retrieval.query import check_text
    from ragloom.retrieval.routing.monitor import AdaptiveTally

    queries = _load_queries(config, artifacts)
    settings = settings_of(weaviate, neo4j, embedder, nlp)
    # one parse of everything but the text: a bad strategy, filter, option or profile fails before anything loads
    base = parse_query(_query_fields(config), text=queries[0] if queries else "-",
                       profiles=load_profiles(settings.agent_profiles) if config.profile else None)
    rows, answers = [], []
    adaptive = AdaptiveTally()
    # the run's clients (opened at resource setup); Neo4j, when it was down then, is loaded by a graph strategy
    with Ragloom(settings, vectors=weaviate.store(), graph=neo4j.opened()) as rag:
        for q in queries:
            if config.answer:
                reply = rag.ask(base.replace(text=check_text(q)))
                answers.append({"query": q, "answer": reply.answer, "message": reply.message,
                                "abstained": reply.abstained, "confidence": reply.confidence, "cached": reply.cached,
                                "uncited": reply.uncited, "tokens_in": reply.tokens_in, "tokens_out": reply.tokens_out,
                                "latency_ms": reply.latency_ms.get("total"),
                                "citations": json.dumps([c.__dict__ for c in reply.citations])})
                adaptive.add(reply.retrieval)
                context.log.info(f"answered {q!r}: {len(reply.citations)} citation(s), confidence "
                                 f"{reply.confidence}, {reply.message or 'ok'}")
                continue
            result = rag.retrieve(base.replace(text=check_text(q)))
            rows += result_rows(q, result.items, result.metadata)
            adaptive.add(result.metadata.details)
    if config.answer:
        frame = pd.DataFrame(answers)
        path = artifacts.write(artifacts.run_name("query_answers", context.run_id), frame)
        path.with_suffix(".json").write_text(frame.to_json(orient="records", indent=1))
        return Output(str(path), metadata={"queries": len(queries), "answers": len(frame), "parquet": str(path),
                                           "answers_table": markdown_table(answers, ["query", "answer", "confidence",
                                                                                     "cached", "message"], limit=50),
                                           **adaptive_metadata(adaptive),
                                           "config": MetadataValue.json(config.model_dump())})
    frame = pd.DataFrame(rows, columns=ROW_COLUMNS)
    path = artifacts.write(artifacts.run_name("query_results", context.run_id), frame)
    path.with_suffix(".json").write_text(frame.to_json(orient="records", indent=1))
    abstained = {row["query"] for row in rows if row["abstained"]}
    return Output(str(path), metadata={"queries": len(queries), "results": sum(1 for row in rows if row["chunk_id"]),
                                       "queries_abstained": len(abstained), "parquet": str(path),
                                       **adaptive_metadata(adaptive),
                                       "results_table": markdown_table(rows, ["query", "rank", "score", "document_id",
                                                                              "heading_path", "text"], limit=50),
                                       "config": MetadataValue.json(config.model_dump())})


@job(executor_def=in_process_executor, description="Hybrid, graph_rag or hierarchical retrieval from the Launchpad",
     tags={"ragloom/kind": "query"})
def query_job():
    run_queries()
