"""A cluster profile that fails to start leaves none of its parts running (apart from test_cluster.py, whose
module-scoped profile holds the same ports)."""

from __future__ import annotations

import socket

import pytest

from ragloom import stack
from ragloom.errors import StackError
from ragloom.settings import Settings
from ragloom.stack import cluster, weaviate_cluster


def test_a_failed_start_stops_every_part_it_started():
    base = stack.up(Settings.from_env())
    cluster.down(base)
    last = weaviate_cluster.nodes(base)[-1]
    with socket.socket() as squatter:  # the last node cannot bind its HTTP port
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", last.http_port))
        squatter.listen()
        with pytest.raises(StackError, match="exited during start-up"):
            cluster.up(base)
    status = cluster.status(base)
    assert {name: p["pid"] for name, p in status["processes"].items() if p["pid"] is not None} == {}
    assert not any(weaviate_cluster.process(base, n).running() for n in weaviate_cluster.nodes(base))
