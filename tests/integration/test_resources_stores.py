"""Store resources on the real Weaviate and Neo4j: clients opened at resource setup, closed at teardown."""

from __future__ import annotations

import dagster as dg
import pytest
from neo4j.exceptions import DriverError

from resources import Neo4jResource, WeaviateResource


def test_store_clients_open_at_setup_and_close_at_teardown(settings, namespace):
    given = {"weaviate": WeaviateResource(collection_prefix=namespace), "neo4j": Neo4jResource(namespace=namespace)}
    with dg.build_resources(given) as resources:
        vectors, graph = resources.weaviate.opened(), resources.neo4j.opened()
        assert vectors is not None and vectors.client.is_ready() and vectors.prefix == namespace
        assert graph is not None and graph.namespace == namespace
        graph.driver.verify_connectivity()
        assert resources.weaviate.store() is vectors  # steps get the client opened at setup
    assert not vectors.client.is_connected()
    with pytest.raises(DriverError, match="closed"):
        graph.driver.verify_connectivity()
