"""The `ragloom` command's input checks: bad input is reported before anything connects or loads."""

from __future__ import annotations

import socket

import pytest

from ragloom.cli import main


@pytest.fixture
def closed_port(monkeypatch):
    """Point Weaviate at a port nothing listens on: a test that reaches a connection attempt fails differently."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
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
