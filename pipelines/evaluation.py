"""The evaluation job: `ragloom eval` from the Launchpad, with the results table and chart in the run's metadata."""


from pathlib import Path
from typing import Any

from dagster import Config, MetadataValue, OpExecutionContext, Output, in_process_executor, job, op
from pydantic import Field

from assets.stores import STORE_WRITER_TAGS
from pipelines._launchpad import inside
from ragloom.errors import ConfigError
from ragloom.evaluation.cli import DEFAULT_CHUNKINGS, DEFAULT_STRATEGIES, names
from resources import ArtifactStore, EmbedderResource, Neo4jResource, NlpResource, WeaviateResource, settings_of


class EvalConfig(Config):
    dataset: str = Field(default="scifact", description="A dataset folder under RAGLOOM_EVAL_DATA_DIR (e.g. "
                                                        "scifact, musique, obliqa)")
    strategies: str = Field(default=DEFAULT_STRATEGIES, description="Retrieval strategies, comma-separated")
    chunking: str = Field(default=DEFAULT_CHUNKINGS, description="Chunkings, comma-separated")
    max_queries: int = Field(default=100, description="A seeded sample of this many queries (0: all)")
    corpus_limit: int = Field(default=1000, description="At most this many documents, gold ones kept (0: all)")
    depth: int = Field(default=30, description="Chunks retrieved per query")
    resamples: int = Field(default=1000, description="Bootstrap resamples for the 95% intervals")
    baselines: bool = Field(default=True, description="Also run whole-document BM25 and dense baselines")
    namespace: str = Field(default="", description="Collection prefix / graph namespace (default Eval<Dataset>)")
    options: dict[str, Any] = Field(default_factory=dict, description="Retrieval options, e.g. {alpha: 0.3}, each "
                                    "given to the strategies that declare it (`ragloom strategies` lists them)")


def _dataset_dir(name: str, root: Path) -> Path:
    """The dataset folder, which must lie under the evaluation data folder: the Launchpad must not turn any
    folder the process can read into a corpus written to the stores."""
    path = (root / name).resolve()
    if not inside(path, [root]):
        raise ConfigError(f"dataset {name!r} is outside RAGLOOM_EVAL_DATA_DIR ({root})")
    if not (path / "corpus.jsonl").is_file():
        raise ConfigError(f"dataset {name!r}: {path} has no corpus.jsonl (datasets in {root}: "
                          f"{', '.join(sorted(p.name for p in root.iterdir() if (p / 'corpus.jsonl').is_file()))})")
    return path


@op(description="Ingests the dataset into its own collections and graph namespace, runs every query through every "
                "strategy, and scores it against the baselines")
def run_evaluation(context: OpExecutionContext, config: EvalConfig, weaviate: WeaviateResource,
                   neo4j: Neo4jResource, embedder: EmbedderResource, nlp: NlpResource,
                   artifacts: ArtifactStore) -> Output[str]:
    from ragloom.evaluation.runner import evaluate

    settings = settings_of(weaviate, neo4j, embedder, nlp, artifacts)
    dataset = _dataset_dir(config.dataset, settings.eval_data_dir)
    report = evaluate(str(dataset), names(config.strategies), names(config.chunking), settings,
                      namespace=config.namespace or None, max_queries=config.max_queries or None,
                      corpus_limit=config.corpus_limit or None, depth=config.depth, resamples=config.resamples,
                      query_options=config.options, baselines=config.baselines, log=context.log.info)
    out = artifacts.root / artifacts.run_name("eval_results", context.run_id)
    paths = report.write(out)
    errors = [s.name for s in report.systems if s.error]
    adaptive = {s.name: s.adaptive for s in report.systems if s.adaptive}
    return Output(str(out), metadata={
        "dataset": report.dataset, "documents": report.documents,
        **{f"queries_{level}": len(ids) for level, ids in report.query_ids.items()},
        "results": MetadataValue.md(report.markdown()),
        "chart": MetadataValue.path(str(paths["png"])),
        "csv": MetadataValue.path(str(paths["csv"])),
        "json": MetadataValue.path(str(paths["json"])),
        "ingest": MetadataValue.json(report.ingest),
        "systems_failed": ", ".join(errors) or "none",
        **({"adaptive": MetadataValue.json(adaptive)} if adaptive else {}),
        "config": MetadataValue.json(config.model_dump()),
    })


@job(executor_def=in_process_executor, tags={**STORE_WRITER_TAGS, "ragloom/kind": "eval"},
     description="Retrieval quality (recall, nDCG, MRR with 95% CIs) of strategies × chunkings on a dataset")
def eval_job():
    run_evaluation()
