"""The evaluation end to end on real stores: 30 SciFact claims over 300 abstracts, dense / bm25 / hybrid."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragloom.evaluation import METRICS, evaluate
from ragloom.evaluation.runner import drop_namespace
from ragloom.settings import Settings

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "data" / "scifact"


def test_scifact_smoke(settings: Settings, namespace: str, tmp_path: Path) -> None:
    if not SCIFACT.exists():
        pytest.fail(f"evaluation data missing: {SCIFACT} (see ../shared/data/README.md)")
    try:
        report = evaluate(str(SCIFACT), ["dense", "bm25", "hybrid"], ["recursive"], settings, namespace=namespace,
                          max_queries=30, corpus_limit=300, resamples=200, log=lambda _: None)
        assert report.documents == 300 and report.levels == ["document"]
        assert len(report.query_ids["document"]) == 30
        names = {s.name: s for s in report.systems}
        assert set(names) == {"baseline:bm25/document", "baseline:dense/document",
                              "dense/recursive", "bm25/recursive", "hybrid/recursive"}
        for system in report.systems:
            assert not system.error and system.query_errors == 0, system.name
            for metric in METRICS:
                scores = system.scores["document"][metric]
                assert scores.shape == (30,) and np.all((scores >= 0) & (scores <= 1)), (system.name, metric)
        # on 300 abstracts that hold every gold one, each retriever finds most of them
        for name in ("hybrid/recursive", "dense/recursive", "bm25/recursive"):
            assert names[name].scores["document"]["recall@10"].mean() > 0.5, name
            assert names[name].scores["document"]["ndcg@10"].mean() > 0.4, name
        assert report.ingest["recursive"]["chunks"] >= 300

        paths = report.write(tmp_path)
        assert all(p.stat().st_size > 0 for p in paths.values())
    finally:
        drop_namespace(settings, "scifact", namespace)


def test_eval_job_shows_results_in_the_run(settings: Settings, namespace: str, tmp_path: Path) -> None:
    """The Dagster eval_job: same evaluation, results as run metadata and files under the artifacts folder."""
    from pipelines.evaluation import eval_job
    from resources import ArtifactStore, EmbedderResource, Neo4jResource, NlpResource, WeaviateResource

    if not SCIFACT.exists():
        pytest.fail(f"evaluation data missing: {SCIFACT} (see ../shared/data/README.md)")
    resources = {
        "artifacts": ArtifactStore(base_dir=str(tmp_path / "artifacts")),
        "weaviate": WeaviateResource(api_key=settings.weaviate_api_key),
        "neo4j": Neo4jResource(password=settings.neo4j_password),
        "embedder": EmbedderResource(), "nlp": NlpResource(),
    }
    config = {"ops": {"run_evaluation": {"config": {
        "dataset": "scifact", "strategies": "bm25,hybrid,adaptive", "chunking": "recursive", "max_queries": 12,
        "corpus_limit": 120, "resamples": 50, "baselines": False, "namespace": namespace,
        "options": {"alpha": 0.0}}}}}  # given to hybrid, which declares it: keyword only, so it ranks as bm25
    try:
        result = eval_job.execute_in_process(run_config=config, resources=resources)
        assert result.success
        [output] = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
        metadata = {k: v.value for k, v in output.event_specific_data.metadata.items()}
        assert metadata["dataset"] == "scifact" and metadata["documents"] == 120
        assert metadata["queries_document"] == 12 and metadata["systems_failed"] == "none"
        table = metadata["results"]
        assert "| bm25/recursive |" in table and "| hybrid/recursive |" in table
        adaptive = metadata["adaptive"]["adaptive/recursive"]  # the strategy mix and retries, as run metadata
        assert adaptive["queries"] == 12 and sum(adaptive["routed"].values()) == sum(adaptive["used"].values()) == 12
        assert adaptive.get("retries_judged", 0) == adaptive["retried"] and "adaptive routing" in table
        out = Path(result.output_for_node("run_evaluation"))
        assert out.is_relative_to(tmp_path / "artifacts" / "eval_results")
        assert (out / "scifact_eval.png").stat().st_size > 0 and (out / "scifact_eval.csv").stat().st_size > 0
        written = json.loads((out / "scifact_eval.json").read_text())
        assert written["config"]["query_options"] == {"bm25": {"abstain": False},
                                                      "hybrid": {"abstain": False, "alpha": 0.0},
                                                      "adaptive": {"abstain": False}}
        assert written["adaptive"]["adaptive/recursive"] == adaptive
        ndcg = {name: runs["document"]["ndcg@10"] for name, runs in written["per_query"].items()}
        assert ndcg["hybrid/recursive"] == ndcg["bm25/recursive"]
    finally:
        drop_namespace(settings, "scifact", namespace)
