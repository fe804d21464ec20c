"""The stores retrieval uses fit the protocols it types them with: same methods, same parameters and defaults."""

from __future__ import annotations

import inspect

import pytest

from ragloom.stores.base import GraphStore, VectorStore
from ragloom.stores.neo4j import Neo4jStore
from ragloom.stores.weaviate import WeaviateStore


def _protocol_methods(protocol: type) -> list[str]:
    return [n for n, v in vars(protocol).items() if inspect.isfunction(v) and not n.startswith("_")]


@pytest.mark.parametrize("protocol, store", [(VectorStore, WeaviateStore), (GraphStore, Neo4jStore)])
def test_store_implements_its_protocol(protocol, store):
    methods = _protocol_methods(protocol)
    assert methods
    for name in methods:
        wanted = inspect.signature(getattr(protocol, name)).parameters
        given = inspect.signature(getattr(store, name)).parameters
        assert [(p.name, p.kind, p.default) for p in wanted.values()] == \
            [(p.name, p.kind, p.default) for p in given.values()], f"{store.__name__}.{name}"
