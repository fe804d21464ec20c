"""The `ragloom` command's input checks: bad input is reported before anything connects or loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from polling import free_port

from ragloom.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def closed_port(monkeypatch):
    """Point Weaviate at a port nothing listens on: a test that reaches a connection attempt fails differently."""
    port = free_port()
    monkeypatch.setenv("RAGLOOM_WEAVIATE_HTTP_PORT", str(port))
    return port


@pytest.mark.parametrize("args, needle", [
    (["--filter", "{not json"], "filter"),
    (["--filter", '{"year": {"between": [1, 2]}}'], "year"),
    (["--scope", "a/b/c/d/e"], "more than 4 levels"),
])
def test_query_rejects_bad_filter_or_scope_before_connecting(closed_port, capsys, args, needle):
    assert main(["query", "anything", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragloom: error:") and needle in err
    assert str(closed_port) not in err and "connect" not in err.lower()


def test_query_against_a_dead_store_is_a_clear_error(closed_port, capsys):
    assert main(["query", "anything"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragloom: error:") and "Weaviate" in err


@pytest.mark.parametrize("args, needle", [
    (["--generation", "nope"], "generation"),
    (["--transforms", "hyde,nope"], "transform"),
    (["--filter", "{not json"], "filter"),
])
def test_ask_rejects_bad_names_before_connecting(closed_port, capsys, args, needle):
    assert main(["ask", "anything", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragloom: error:") and needle in err
    assert str(closed_port) not in err and "connect" not in err.lower()


@pytest.mark.parametrize("args, needles", [
    (["--option", "alpha=2"], ["alpha=2.0", "number 0 to 1"]),
    (["--option", "fusion_type=sum"], ["fusion_type='sum'", "relative_score | ranked"]),
    (["--option", "max_hops=2"], ["unknown option 'max_hops'", "alpha"]),
    (["--option", "alpha"], ["key=value"]),
    (["--options", "{not json"], ["not valid JSON"]),
    (["--options", "[1, 2]"], ["JSON object"]),
    (["--options", '{"lanes": "dense"}'], ["lanes='dense'", "a list of dense | bm25 | hybrid"]),
    (["--strategy", "graph_rag", "--option", "damping=1.5"], ["damping=1.5", "number 0 to 0.99"]),
    (["--strategy", "no_such"], ["unknown retrieval strategy 'no_such'", "hierarchical"]),
])
def test_query_rejects_bad_options_before_connecting(closed_port, capsys, args, needles):
    assert main(["query", "anything", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragloom: error:") and all(n in err for n in needles), err
    assert str(closed_port) not in err and "connect" not in err.lower()


def test_query_option_wins_over_options_json():
    from ragloom.cli import _parse_query, build_parser

    args = build_parser().parse_args(["query", "x", "--options", '{"alpha": 0.2, "dedup": false}', "--option",
                                      "alpha=0.7"])
    assert dict(_parse_query(args, args.text).options) == {"alpha": 0.7, "dedup": False}


def test_query_chunking_defaults_to_the_strategys_own_collection():
    """`ragloom query --strategy hierarchical` must not search the recursive collection (issue 14, bug 1)."""
    from ragloom.api import Ragloom
    from ragloom.cli import build_parser
    from ragloom.retrieval import strategy_class

    for command in (["query", "q"], ["ask", "q"]):
        assert build_parser().parse_args(command).chunking is None
    rag = Ragloom(vectors=object())  # a store object is never called by building a retriever
    assert rag.retriever("hierarchical", "").chunking == "hierarchical"
    assert rag.retriever("hybrid", "").chunking == "recursive"
    assert rag.retriever("hierarchical", "recursive").chunking == "recursive"  # an explicit choice stands
    assert strategy_class("hierarchical").default_chunking == "hierarchical"


def test_strategies_lists_every_registered_strategy_with_its_options(capsys):
    from ragloom.retrieval import POSTPROCESS_OPTIONS, available_strategies, strategy_class

    assert main(["strategies"]) == 0
    out = capsys.readouterr().out
    for name in available_strategies():
        cls = strategy_class(name)
        assert f"{name}: {cls.summary}" in out
        for option_name, option in cls.declared_options.items():
            assert option_name in out and option.help in out and option.allowed() in out
    assert all(name in out for name in POSTPROCESS_OPTIONS)
    assert main(["strategies", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in listed] == available_strategies()
    hybrid = next(s for s in listed if s["name"] == "hybrid")
    alpha = next(o for o in hybrid["options"] if o["name"] == "alpha")
    assert alpha == {"name": "alpha", "default": "0.5", "allowed": "number 0 to 1",
                     "help": strategy_class("hybrid").declared_options["alpha"].help}


def test_options_reference_is_the_markdown_table():
    """docs/reference/options.md carries `ragloom strategies --markdown` (run fresh: only the built-in strategies);
    `python -m ragloom.docs_reference` regenerates it when an option changes."""
    out = subprocess.run([sys.executable, "-m", "ragloom", "strategies", "--markdown"], capture_output=True,
                         text=True, check=True, cwd=REPO).stdout.strip()
    page = (REPO / "docs" / "reference" / "options.md").read_text()
    assert out in page, "docs/reference/options.md is stale: run `python -m ragloom.docs_reference`"
    assert out.count("\n") > 40  # every option of every strategy, one row each


def test_ask_takes_the_same_retrieval_options(closed_port, capsys):
    assert main(["ask", "anything", "--option", "alpha=7"]) == 2
    err = capsys.readouterr().err
    assert "alpha=7.0 is not allowed" in err and "connect" not in err.lower()
