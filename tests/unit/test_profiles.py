"""Agent profiles: read and checked at start, filling what a request leaves out, at every door's parser."""

from __future__ import annotations

import pytest

from ragloom.errors import ConfigError, QueryError
from ragloom.query import load_profiles, parse_query

GOOD = """
support:
  description: answers from the manuals
  strategy: dense
  namespaces: [manuals]
  k: 8
  options: {dedup: false, rerank: false}
  transforms: [reformulate]
  remember:
    web_search: {ttl_seconds: 60}
    calculator: {}
silent:
  namespaces: []
  remember: [notes]
"""


@pytest.fixture()
def profiles(tmp_path):
    path = tmp_path / "agents.yaml"
    path.write_text(GOOD)
    return load_profiles(path)


def test_profile_fills_what_the_request_leaves_out(profiles) -> None:
    q = parse_query(text="how", profile="support", profiles=profiles)
    assert (q.strategy, q.k, q.namespaces, q.transforms, q.profile) == ("dense", 8, ("manuals",), ("reformulate",),
                                                                        "support")
    assert q.options == {"dedup": False, "rerank": False}


def test_request_fields_win_and_options_merge(profiles) -> None:
    q = parse_query({"k": 3, "strategy": "bm25", "options": {"dedup": True}}, text="how", profile="support",
                    profiles=profiles)
    assert (q.strategy, q.k) == ("bm25", 3)
    assert q.options == {"dedup": True, "rerank": False}


def test_empty_namespaces_profile_skips_retrieval(profiles) -> None:
    assert parse_query(text="hi", profile="silent", profiles=profiles).skips_retrieval


def test_remembered_tools(profiles) -> None:
    assert profiles.get("support").tool("web_search").ttl_seconds == 60
    assert profiles.get("silent").tool("notes").ttl_seconds is None
    with pytest.raises(QueryError, match="does not remember results of tool 'shell'.*web_search, calculator"):
        profiles.get("support").tool("shell")


def test_unknown_or_unconfigured_profile_is_a_query_error(profiles) -> None:
    with pytest.raises(QueryError, match="unknown profile 'nope'; profiles: support, silent"):
        parse_query(text="x", profile="nope", profiles=profiles)
    with pytest.raises(QueryError, match="RAGLOOM_AGENT_PROFILES"):
        parse_query(text="x", profile="support")


@pytest.mark.parametrize(("body", "message"), [
    ("a: {strategy: nope}", "profile 'a': unknown retrieval strategy 'nope'"),
    ("a: {colour: red}", r"profile 'a': unknown key\(s\) \['colour'\]"),
    ("a: {options: {alpha: 7}}", "profile 'a'.*alpha"),
    ("a: {remember: {t: {ttl_seconds: -1}}}", "tool 't': ttl_seconds must be within"),
    ("a: {remember: {t: {forever: true}}}", "tool 't' takes only ttl_seconds"),
    ("- a\n- b", "must map profile names"),
    ("a: [unclosed", "not valid YAML"),
])
def test_a_bad_file_fails_at_load_naming_the_profile(tmp_path, body: str, message: str) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=message):
        load_profiles(path)


def test_missing_file_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_profiles(tmp_path / "absent.yaml")
    assert not load_profiles(None)


def test_exclude_tools_is_checked() -> None:
    assert parse_query(text="x", exclude_tools="a,b").exclude_tools == ("a", "b")
    with pytest.raises(QueryError, match="exclude_tools"):
        parse_query(text="x", exclude_tools=[1])


def test_cli_lists_profiles_and_refuses_a_bad_file(tmp_path, monkeypatch, capsys) -> None:
    from ragloom.cli import main

    path = tmp_path / "agents.yaml"
    path.write_text(GOOD)
    monkeypatch.setenv("RAGLOOM_AGENT_PROFILES", str(path))
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    assert "support: answers from the manuals" in out and "web_search (ttl 60.0)" in out
    path.write_text("a: {strategy: nope}")
    assert main(["profiles"]) == 2
    assert "profile 'a': unknown retrieval strategy 'nope'" in capsys.readouterr().err


def test_cli_query_arguments_override_the_profile(tmp_path, monkeypatch) -> None:
    from ragloom.cli import _parse_query, build_parser

    path = tmp_path / "agents.yaml"
    path.write_text(GOOD)
    monkeypatch.setenv("RAGLOOM_AGENT_PROFILES", str(path))
    args = build_parser().parse_args(["query", "how", "--profile", "support", "-k", "2", "--option", "dedup=true"])
    q = _parse_query(args, args.text)
    assert (q.strategy, q.k, q.namespaces) == ("dense", 2, ("manuals",))
    assert q.options == {"dedup": True, "rerank": False}
    args = build_parser().parse_args(["query", "how"])
    assert (_parse_query(args, args.text).strategy, _parse_query(args, args.text).k) == ("hybrid", 5)


@pytest.mark.parametrize("command", [["serve"], ["mcp"]])
def test_serve_and_mcp_refuse_a_bad_profiles_file_before_starting(tmp_path, monkeypatch, capsys, command) -> None:
    from ragloom.cli import main
    from ragloom.service.keys import KeyStore

    path = tmp_path / "agents.yaml"
    path.write_text("a: {k: 0}")
    key, _ = KeyStore(tmp_path / "keys.json").create("acme", "alice")
    monkeypatch.setenv("RAGLOOM_AGENT_PROFILES", str(path))
    monkeypatch.setenv("RAGLOOM_SERVICE_KEYS_FILE", str(tmp_path / "keys.json"))
    monkeypatch.setenv("RAGLOOM_API_KEY", key)
    assert main(command) == 2
    assert "profile 'a': k must be an integer from 1 to 200" in capsys.readouterr().err


def test_query_job_config_leaves_defaults_to_the_profile(profiles) -> None:
    from pipelines.query import QueryConfig, _query_fields

    plain = _query_fields(QueryConfig())
    assert plain["strategy"] == "hybrid" and plain["k"] == 5 and "profile" not in plain
    fields = _query_fields(QueryConfig(profile="support", k=2))
    assert fields == {"k": 2, "profile": "support"}
    q = parse_query(fields, text="how", profiles=profiles)
    assert (q.strategy, q.k, q.namespaces) == ("dense", 2, ("manuals",))
