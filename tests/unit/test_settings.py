"""Settings come from the environment, fail clearly, and never show secrets."""

from __future__ import annotations

from dataclasses import fields

import pytest

from ragloom.errors import ConfigError
from ragloom.indexing.synonyms import SynonymParams
from ragloom.settings import Settings, env_name
from ragloom.types import Scope


@pytest.fixture
def env(monkeypatch, tmp_path):
    for name in list(__import__("os").environ):
        if name.startswith("RAGLOOM_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RAGLOOM_DATA_DIR", str(tmp_path))
    return monkeypatch


def test_defaults_and_overrides(env, tmp_path):
    s = Settings.from_env()
    assert s.weaviate_http_port == 18080 and s.chunkings == ("recursive", "semantic", "hierarchical", "headered")
    assert s.artifacts_dir == tmp_path / "artifacts" and s.resolved_uploads_dir == tmp_path / "uploads"
    env.setenv("RAGLOOM_CHUNKINGS", "recursive, headered")
    env.setenv("RAGLOOM_NEO4J_BOLT_PORT", "7777")
    assert s.spacy_processes == 0  # one per CPU
    env.setenv("RAGLOOM_SPACY_PROCESSES", "3")
    s = Settings.from_env()
    assert s.chunkings == ("recursive", "headered") and s.resolved_neo4j_uri == "neo4j://127.0.0.1:7777"
    assert s.spacy_processes == 3
    assert (s.graph_synonym_threshold, s.graph_synonym_neighbours) == (0.8, 10)
    env.setenv("RAGLOOM_GRAPH_SYNONYM_THRESHOLD", "0.9")
    env.setenv("RAGLOOM_GRAPH_SYNONYM_NEIGHBOURS", "0")
    assert SynonymParams.from_settings(Settings.from_env()) == SynonymParams(threshold=0.9, neighbours=0)


@pytest.mark.parametrize("name,value,needle", [
    ("RAGLOOM_WEAVIATE_HTTP_PORT", "eighty", "RAGLOOM_WEAVIATE_HTTP_PORT"),
    ("RAGLOOM_GRAPH_CHUNKINGS", "semantic,bogus", "bogus"),
    ("RAGLOOM_EMBED_BACKEND", "tpu", "RAGLOOM_EMBED_BACKEND"),
    ("RAGLOOM_SPACY_PROCESSES", "-2", "RAGLOOM_SPACY_PROCESSES"),
    ("RAGLOOM_WEAVIATE_WRITE_TIMEOUT_SECONDS", "0", "RAGLOOM_WEAVIATE_WRITE_TIMEOUT_SECONDS"),
    ("RAGLOOM_WEAVIATE_QUERY_TIMEOUT_SECONDS", "-1", "RAGLOOM_WEAVIATE_QUERY_TIMEOUT_SECONDS"),
    ("RAGLOOM_WEAVIATE_WRITE_REQUESTS", "-1", "RAGLOOM_WEAVIATE_WRITE_REQUESTS"),
    ("RAGLOOM_WEAVIATE_WRITE_PROCESSES", "33", "RAGLOOM_WEAVIATE_WRITE_PROCESSES"),
    ("RAGLOOM_STORE_RETRY_DELAY_SECONDS", "0", "RAGLOOM_STORE_RETRY_DELAY_SECONDS"),
    ("RAGLOOM_SERVICE_GRAPH_WORKERS", "0", "RAGLOOM_SERVICE_GRAPH_WORKERS"),
    ("RAGLOOM_GRAPH_SYNONYM_THRESHOLD", "0", "RAGLOOM_GRAPH_SYNONYM_THRESHOLD"),
    ("RAGLOOM_GRAPH_SYNONYM_THRESHOLD", "high", "RAGLOOM_GRAPH_SYNONYM_THRESHOLD"),
    ("RAGLOOM_GRAPH_SYNONYM_NEIGHBOURS", "-1", "RAGLOOM_GRAPH_SYNONYM_NEIGHBOURS"),
    ("RAGLOOM_CHUNKER_OPTIONS", "{headered", "RAGLOOM_CHUNKER_OPTIONS"),
    ("RAGLOOM_CHUNKER_OPTIONS", '{"headered": 3}', "RAGLOOM_CHUNKER_OPTIONS"),
])
def test_invalid_values_name_the_setting(env, name, value, needle):
    env.setenv(name, value)
    with pytest.raises(ConfigError, match=needle):
        Settings.from_env()


@pytest.mark.parametrize("name,value,needle", [
    ("RAGLOOM_CHUNKINGS", "recursive,magic", "magic"),
    ("RAGLOOM_STRATEGIES", "recursive,magic", "magic"),  # the former name is still read
    ("RAGLOOM_CHUNKER_OPTIONS", '{"magic": {}}', "magic"),
    ("RAGLOOM_CHUNKER_OPTIONS", '{"headered": {"heading_prefx": true}}', "heading_prefx"),
])
def test_chunking_settings_are_checked_where_chunks_are_made(env, name, value, needle):
    """Settings know no chunker: the names are checked against the registry by the chunking layer, which every
    ingestion composition root calls (resources.settings_of, the evaluation runner)."""
    from ragloom.chunking import check_chunking_settings

    env.setenv(name, value)
    settings = Settings.from_env()
    with pytest.raises(ConfigError, match=needle):
        check_chunking_settings(settings)


def test_every_field_is_read_from_its_variable(env, tmp_path):
    """RAGLOOM_<FIELD> (``env_name``) sets each field, parsed by the type of its default (what the values mean
    is validate's business, tested above and below)."""
    env.setattr(Settings, "validate", lambda self: None)
    defaults = Settings()
    for f in fields(Settings):
        default = getattr(defaults, f.name)
        if isinstance(default, tuple):
            value, raw = ("recursive",), " recursive, "
        elif isinstance(default, int | float):
            value = raw = type(default)(7)
        elif isinstance(default, str):
            value = raw = "http://example.test:1" if f.name.endswith("url") else "ONE"
        else:  # a path (or None: a path under the data folder)
            value = raw = tmp_path / f.name
        env.setenv(env_name(f.name), str(raw))
        assert getattr(Settings.from_env(), f.name) == value, env_name(f.name)
        env.delenv(env_name(f.name))
        env.setenv("RAGLOOM_DATA_DIR", str(tmp_path))


def test_graph_chunking_must_be_chunked(env):
    env.setenv("RAGLOOM_CHUNKINGS", "headered")
    with pytest.raises(ConfigError, match="does not chunk"):
        Settings.from_env()


@pytest.mark.parametrize("name", ["RAGLOOM_GRAPH_CHUNKINGS", "RAGLOOM_GRAPH_STRATEGIES"])
def test_an_empty_graph_chunkings_switches_the_graph_off(env, name):
    """Empty means no graph (issue 14: it used to fall back to the default, recursive)."""
    env.setenv(name, "")
    s = Settings.from_env()
    assert s.graph_chunkings == ()
    from pipelines.definitions import build_defs

    keys = {k.to_user_string() for k in build_defs(s).resolve_asset_graph().get_all_asset_keys()}
    assert not any(k.startswith("graph_") for k in keys) and "vectors_recursive" in keys
    env.setenv(name, " , ")
    assert Settings.from_env().graph_chunkings == ()
    env.delenv(name)
    assert Settings.from_env().graph_chunkings == ("recursive",)  # unset: the default


def test_the_new_names_win_over_the_former_ones(env):
    env.setenv("RAGLOOM_STRATEGIES", "recursive,headered")
    env.setenv("RAGLOOM_CHUNKINGS", "recursive")
    assert Settings.from_env().chunkings == ("recursive",)


def test_a_registered_custom_chunker_can_be_configured_materialized_and_queried(env, register_chunker_for_test):
    """Names come from the chunker registry: a chunker registered before the settings are read is accepted by
    the settings, gets its chunk/vector (and graph) assets, and can be named as a query's collection."""
    from pipelines.definitions import build_defs
    from ragloom.api import Ragloom
    from ragloom.chunking.recursive import RecursiveChunker
    from ragloom.errors import RetrievalError

    register_chunker_for_test("test_custom_paragraphs", type("CustomChunker", (RecursiveChunker,), {}))
    env.setenv("RAGLOOM_CHUNKINGS", "recursive,test_custom_paragraphs")
    env.setenv("RAGLOOM_GRAPH_CHUNKINGS", "test_custom_paragraphs")
    s = Settings.from_env()
    keys = {k.to_user_string() for k in build_defs(s).resolve_asset_graph().get_all_asset_keys()}
    assert {"chunks_test_custom_paragraphs", "vectors_test_custom_paragraphs", "graph_test_custom_paragraphs"} <= keys
    rag = Ragloom(s, vectors=object())  # building a retriever calls no store
    assert rag.retriever("hybrid", "test_custom_paragraphs").chunking == "test_custom_paragraphs"
    with pytest.raises(RetrievalError, match="test_custom_paragraphs"):  # the error lists the registered ones
        rag.retriever("hybrid", "no_such_chunking")


def test_generated_secrets_are_read_and_masked(env, tmp_path):
    (tmp_path / "stack").mkdir()
    (tmp_path / "stack" / "neo4j.password").write_text("s3cret-generated\n")
    s = Settings.from_env()
    assert s.neo4j_password == "s3cret-generated"
    view = s.public_view()
    assert view["neo4j_password"] == "***" and "s3cret" not in repr(view)
    env.setenv("RAGLOOM_NEO4J_PASSWORD", "from-env")
    assert Settings.from_env().neo4j_password == "from-env"


def test_scope_paths_and_visibility():
    chat = Scope("acme", "alice", "c1")
    assert chat.path == "acme/alice/c1"
    assert chat.visible_paths() == ["__shared__", "acme", "acme/alice", "acme/alice/c1"]
    assert Scope.from_path("acme/alice/c1/agent7").visible_paths()[-1] == "acme/alice/c1/agent7"
    assert Scope.from_path("") == Scope() and Scope().path == "__shared__"
    for bad in ("a/b/c/d/e", "a//c"):
        with pytest.raises(ValueError):
            Scope.from_path(bad)
    with pytest.raises(ValueError):
        Scope("acme", "", "c1")


def test_chunker_options_reach_the_chunker(env):
    from ragloom.chunking import chunker_for

    assert Settings.from_env().chunker_params("headered") == {}
    env.setenv("RAGLOOM_CHUNKER_OPTIONS", '{"headered": {"heading_prefix": true, "prefix_levels": 1}}')
    s = Settings.from_env()
    assert s.chunker_params("headered") == {"heading_prefix": True, "prefix_levels": 1}
    assert s.chunker_params("recursive") == {}
    chunker = chunker_for("headered", None, **s.chunker_params("headered"))
    assert chunker.heading_prefix and chunker.prefix_levels == 1
