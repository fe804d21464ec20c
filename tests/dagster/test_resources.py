"""The resources' one config source: the environment's Settings, with resource fields as overrides."""

from __future__ import annotations

import dagster as dg
import pytest

from ragloom.errors import ConfigError
from resources import (
    ArtifactStore,
    CorpusResource,
    EmbedderResource,
    Neo4jResource,
    NlpResource,
    WeaviateResource,
    default_resources,
    settings_of,
)


def test_unset_fields_take_the_environment_at_run_time_not_at_import(monkeypatch, tmp_path):
    resource = EmbedderResource()  # built before the environment changes, as default_resources() is at import
    monkeypatch.setenv("RAGLOOM_EMBED_BATCH_SIZE", "17")
    monkeypatch.setenv("RAGLOOM_DOCS_DIR", str(tmp_path / "docs"))
    assert resource.settings().embed_batch_size == 17
    assert CorpusResource().sources()[0].root == tmp_path / "docs"
    assert EmbedderResource(batch_size=5).settings().embed_batch_size == 5  # a set field overrides


def test_parse_caps_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("RAGLOOM_PARSE_MAX_SHEET_ROWS", "250")
    monkeypatch.setenv("RAGLOOM_PARSE_MAX_UNPACKED_BYTES", "1000000")
    limits = CorpusResource().parse_limits()
    assert (limits.max_sheet_rows, limits.max_unpacked_bytes, limits.max_bytes) == (250, 1_000_000, 50_000_000)


def test_settings_of_merges_every_resource_over_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGLOOM_SPACY_GEMM", "blis")
    monkeypatch.setenv("RAGLOOM_WEAVIATE_HOST", "10.0.0.9")
    settings = settings_of(WeaviateResource(collection_prefix="Mine"), Neo4jResource(namespace="mine", user="me"),
                           EmbedderResource(backend="onnx"), NlpResource(processes=2),
                           ArtifactStore(base_dir=str(tmp_path / "art")))
    assert (settings.collection_prefix, settings.weaviate_host) == ("Mine", "10.0.0.9")
    assert (settings.graph_namespace, settings.neo4j_user) == ("mine", "me")
    assert (settings.embed_backend, settings.spacy_processes, settings.spacy_gemm) == ("onnx", 2, "blis")
    assert settings.artifacts_dir == tmp_path / "art" and ArtifactStore(base_dir=str(tmp_path)).root == tmp_path


def test_an_invalid_override_is_a_config_error():
    with pytest.raises(ConfigError, match="RAGLOOM_EMBED_BACKEND='tpu'"):
        EmbedderResource(backend="tpu").settings()
    with pytest.raises(ConfigError, match="RAGLOOM_SPACY_GEMM"):
        settings_of(NlpResource(gemm="mkl"))


def test_default_resources_hold_no_configured_values():
    """Every value (secrets included) comes from the environment when a run starts, so none is in the config
    the UI shows."""
    for name, resource in default_resources().items():
        if hasattr(resource, "settings_fields"):
            assert resource.overrides() == {}, name


def test_settings_are_resolved_at_setup_for_a_run(monkeypatch, tmp_path):
    seen = {}

    @dg.op
    def probe(artifacts: ArtifactStore) -> None:
        monkeypatch.setenv("RAGLOOM_ARTIFACTS_DIR", str(tmp_path / "changed-mid-run"))
        seen["root"] = artifacts.root

    @dg.job(resource_defs={"artifacts": ArtifactStore()})
    def probe_job():
        probe()

    monkeypatch.setenv("RAGLOOM_ARTIFACTS_DIR", str(tmp_path / "at-start"))
    assert probe_job.execute_in_process().success
    assert seen["root"] == tmp_path / "at-start"  # one Settings for the whole run


def test_a_store_down_at_setup_fails_the_step_that_uses_it_not_the_setup():
    """Nothing listens on the ports: setup logs and goes on; the store's first use raises the StoreError the
    step's RetryPolicy retries."""
    from polling import free_port

    from ragloom.errors import StoreError

    port = free_port()
    down = {"weaviate": WeaviateResource(host="127.0.0.1", http_port=port, grpc_port=port, url="", api_key=""),
            "neo4j": Neo4jResource(uri=f"bolt://127.0.0.1:{port}", password="x")}
    with dg.build_resources(down) as resources:
        for name in down:
            assert getattr(resources, name).opened() is None
            with pytest.raises(StoreError):
                getattr(resources, name).store()
