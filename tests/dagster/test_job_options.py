"""The query and eval jobs' Launchpad `options`: checked against the strategies' declared options before
anything connects or loads, with an error naming the option and what it takes."""

from __future__ import annotations

import pytest
from polling import free_port

from resources import ArtifactStore, EmbedderResource, Neo4jResource, NlpResource, WeaviateResource


@pytest.fixture
def resources(tmp_path):
    # a Weaviate nobody listens on: a job that got as far as connecting would fail with a different error
    closed_port = free_port()
    return {"artifacts": ArtifactStore(base_dir=str(tmp_path)),
            "weaviate": WeaviateResource(http_port=closed_port, grpc_port=closed_port),
            "neo4j": Neo4jResource(), "embedder": EmbedderResource(), "nlp": NlpResource()}


def _failure(result) -> tuple[str, str]:
    assert not result.success
    error = result.get_step_failure_events()[0].step_failure_data.error
    cause = error.cause or error
    return cause.cls_name, cause.message.splitlines()[0]


@pytest.mark.parametrize("strategy, options, needles", [
    ("hybrid", {"alpha": 5}, ["alpha=5 is not allowed", "number 0 to 1"]),
    ("hybrid", {"fusion_type": "sum"}, ["fusion_type", "relative_score | ranked"]),
    ("graph_rag", {"vector_lane": "bm25"}, ["vector_lane", "dense | hybrid"]),
    ("bm25", {"alpha": 0.3}, ["unknown option 'alpha'"]),
    ("no_such", {}, ["unknown retrieval strategy 'no_such'"]),
])
def test_query_job_refuses_bad_options(resources, strategy, options, needles):
    from pipelines.query import query_job

    result = query_job.execute_in_process(
        run_config={"ops": {"run_queries": {"config": {"strategy": strategy, "options": options}}}},
        resources=resources, raise_on_error=False)
    cls_name, message = _failure(result)
    assert cls_name == "QueryError" and all(n in message for n in needles), message


@pytest.mark.parametrize("strategies, options, needles", [
    ("bm25,hybrid", {"alpha": 2}, ["hybrid: option alpha=2 is not allowed", "number 0 to 1"]),
    ("dense,bm25", {"alpha": 0.3}, ["unknown option 'alpha'", "dedup"]),
    ("hybrid,graph_rag", {"damping": 2}, ["graph_rag: option damping=2 is not allowed", "number 0 to 0.99"]),
])
def test_eval_job_refuses_bad_options_before_ingesting(resources, strategies, options, needles):
    from pipelines.evaluation import eval_job

    config = {"dataset": "scifact", "strategies": strategies, "chunking": "recursive", "options": options}
    result = eval_job.execute_in_process(run_config={"ops": {"run_evaluation": {"config": config}}},
                                         resources=resources, raise_on_error=False)
    cls_name, message = _failure(result)
    assert cls_name == "QueryError" and all(n in message for n in needles), message


@pytest.mark.parametrize("scope", ["acme/../../x", "acme/ alice", "a" * 65])
def test_query_job_refuses_a_bad_scope(resources, scope):
    from pipelines.query import query_job

    result = query_job.execute_in_process(
        run_config={"ops": {"run_queries": {"config": {"strategy": "bm25", "scope": scope}}}},
        resources=resources, raise_on_error=False)
    cls_name, message = _failure(result)
    assert cls_name == "ScopeError" and "is not allowed: use 1-64 letters" in message, message
