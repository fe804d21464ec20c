"""Smoke test of the code location: it loads, and every job, schedule, sensor and check resolves."""

from __future__ import annotations

import dagster as dg

from pipelines.definitions import defs
from ragloom.settings import Settings


def test_definitions_validate():
    dg.Definitions.validate_loadable(defs)


def test_every_job_schedule_and_sensor_resolves():
    repo = defs.get_repository_def()
    jobs = {j.name for j in repo.get_all_jobs()}
    assert {"ingest_job", "query_job", "eval_job"} <= jobs
    for name in jobs:
        assert repo.get_job(name).graph is not None
    assert {s.name for s in repo.schedule_defs} == {"nightly_reingest"}
    assert {s.name for s in repo.sensor_defs} == {"uploads_sensor"}
    for schedule in repo.schedule_defs:
        assert repo.get_job(schedule.job_name)
    for sensor_def in repo.sensor_defs:
        assert sensor_def.job_name == "ingest_job"


def test_ingestion_graph_has_every_configured_stage():
    settings = Settings.from_env()
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    expected = {"documents"}
    expected |= {f"chunks_{s}" for s in settings.chunkings}
    expected |= {f"vectors_{s}" for s in settings.chunkings}
    expected |= {f"graph_{s}" for s in settings.graph_chunkings}
    assert expected <= keys
    check_keys = {c.name for c in defs.resolve_asset_graph().asset_check_keys}
    assert "documents_quality" in check_keys
    assert {f"chunks_{s}_quality" for s in settings.chunkings} <= check_keys


def test_store_assets_are_serialized_by_pools():
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        name = key.to_user_string()
        node = graph.get(key)
        if name.startswith("vectors_"):
            assert node.pools == {"weaviate"}
        if name.startswith("graph_"):
            assert node.pools == {"neo4j"}


def test_eval_job_reads_datasets_only_from_the_eval_data_folder(tmp_path):
    import pytest

    from pipelines.evaluation import _dataset_dir
    from ragloom.errors import ConfigError

    (tmp_path / "data" / "tiny").mkdir(parents=True)
    (tmp_path / "data" / "tiny" / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n')
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "corpus.jsonl").write_text('{"_id": "d1", "text": "secret"}\n')
    root = tmp_path / "data"
    assert _dataset_dir("tiny", root) == (root / "tiny").resolve()
    for escape in ("../outside", str(tmp_path / "outside"), "tiny/../../outside"):
        with pytest.raises(ConfigError, match="outside RAGLOOM_EVAL_DATA_DIR"):
            _dataset_dir(escape, root)
    with pytest.raises(ConfigError, match="no corpus.jsonl.*tiny"):
        _dataset_dir("missing", root)


def test_summary_asset_sits_in_the_llm_pool_only_when_it_calls_a_model():
    import dataclasses

    from assets.summaries import build_summary_assets

    base = dataclasses.replace(Settings.from_env(), llm_base_url="http://127.0.0.1:9/v1")
    for mode, pool in (("auto", "llm"), ("llm", "llm"), ("extractive", "weaviate")):
        asset = build_summary_assets("recursive", dataclasses.replace(base, summary_mode=mode))
        assert asset.op.pool == pool, mode
    assert build_summary_assets("recursive", dataclasses.replace(base, llm_base_url="")).op.pool == "weaviate"
