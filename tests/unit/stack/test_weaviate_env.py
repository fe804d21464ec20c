"""The environment the stack's Weaviate is started with (ragloom.stack.weaviate.start)."""

from __future__ import annotations

import os

from polling import free_port_block, wait_for

from ragloom.settings import Settings
from ragloom.stack import weaviate


def test_extra_env_reaches_the_server_over_the_stack_settings(monkeypatch, tmp_path):
    """A benchmark's A/B of a server setting (benchmarks/hybrid_pool.py): ``extra_env`` is in the started
    process's environment, and wins over a value the stack sets itself."""
    binary = tmp_path / "weaviate-server"
    out = tmp_path / "environ.txt"
    binary.write_text(f"#!/bin/sh\nenv > {out}\nexec sleep 30\n")
    binary.chmod(0o755)
    monkeypatch.setenv("RAGLOOM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAGLOOM_WEAVIATE_BINARY", str(binary))
    base = free_port_block(2)  # nothing listens there: `up` finds no server of ours, nor another program
    monkeypatch.setenv("RAGLOOM_WEAVIATE_HTTP_PORT", str(base))
    monkeypatch.setenv("RAGLOOM_WEAVIATE_GRPC_PORT", str(base + 1))
    settings = Settings.from_env()
    monkeypatch.setattr(weaviate, "ready", lambda _settings: out.exists())
    try:
        weaviate.start(settings, "", extra_env={"QUERY_HYBRID_MAXIMUM_RESULTS": "60", "LOG_LEVEL": "debug"})
        wait_for(lambda: out.exists() and "LOG_LEVEL" in out.read_text(), 10, "the stand-in's environment",
                 interval=0.05)
        environ = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    finally:
        weaviate.process(settings).stop(timeout=5)
    assert environ["QUERY_HYBRID_MAXIMUM_RESULTS"] == "60"
    assert environ["LOG_LEVEL"] == "debug"  # the stack's own value is "warning"
    assert environ["PERSISTENCE_DATA_PATH"] == str(settings.stack_dir / "weaviate" / "data")
    assert os.environ.get("QUERY_HYBRID_MAXIMUM_RESULTS") is None  # nothing leaked into this process
