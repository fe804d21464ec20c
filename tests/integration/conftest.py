"""Integration fixtures: the real local Weaviate and Neo4j, started through `ragloom.stack` if not up.

Every test gets its own collection prefix / graph namespace (`namespace`, or a fresh one from a factory).
Stores come from factories (`weaviate_store_factory`, `neo4j_store_factory`, and `module_...` twins for data
written once per module) that clean up at teardown and then fail the test if anything under its names is left.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ragloom import stack
from ragloom.settings import Settings
from ragloom.stores.neo4j import Neo4jStore
from ragloom.stores.weaviate import WeaviateStore

WeaviateStoreFactory = Callable[..., WeaviateStore]
Neo4jStoreFactory = Callable[..., Neo4jStore]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def settings() -> Settings:
    """Settings of the running local stack (started here when needed; never stopped: other runs share it)."""
    return stack.up(Settings.from_env())


@pytest.fixture(scope="session")
def weaviate_client(settings: Settings) -> Iterator:
    import weaviate
    from weaviate.classes.init import Auth

    client = weaviate.connect_to_local(
        host=settings.weaviate_host,
        port=settings.weaviate_http_port,
        grpc_port=settings.weaviate_grpc_port,
        auth_credentials=Auth.api_key(settings.weaviate_api_key) if settings.weaviate_api_key else None,
    )
    yield client
    client.close()


@pytest.fixture(scope="session")
def neo4j_driver(settings: Settings) -> Iterator:
    from neo4j import GraphDatabase

    driver = GraphDatabase.driver(settings.resolved_neo4j_uri, auth=(settings.neo4j_user, settings.neo4j_password))
    driver.verify_connectivity()
    yield driver
    driver.close()


def unique_name() -> str:
    """A fresh name usable as a Weaviate collection prefix and as a graph namespace."""
    return f"Test{uuid.uuid4().hex[:10]}"


@pytest.fixture
def namespace() -> str:
    """A unique name for this test's collections (Weaviate prefix) and graph namespace."""
    return unique_name()


def _weaviate_stores(client: Any) -> Iterator[WeaviateStoreFactory]:
    made: list[WeaviateStore] = []

    def make(prefix: str | None = None) -> WeaviateStore:
        """A store on the shared client with collection prefix ``prefix`` (a fresh one when None)."""
        store = WeaviateStore(client, prefix or unique_name())
        made.append(store)
        return store

    yield make
    for store in made:
        store.drop_collections()
    prefixes = tuple(store.prefix for store in made)
    leaked = sorted(n for n in client.collections.list_all(simple=True) if prefixes and n.startswith(prefixes))
    assert not leaked, f"collections left behind: {leaked}"


def _neo4j_stores(driver: Any) -> Iterator[Neo4jStoreFactory]:
    made: list[Neo4jStore] = []

    def make(namespace: str | None = None, *, cls: type[Neo4jStore] = Neo4jStore, **kwargs: Any) -> Neo4jStore:
        """A ``cls`` store on the shared driver in graph namespace ``namespace`` (a fresh one when None)."""
        store = cls(driver, namespace or unique_name(), **kwargs)
        made.append(store)
        return store

    yield make
    namespaces = sorted({store.namespace for store in made})
    for store in made:
        store.clear()
    records, _, _ = driver.execute_query("MATCH (n) WHERE n.ns IN $namespaces RETURN n.ns AS ns, count(n) AS n",
                                         namespaces=namespaces)
    leaked = {r["ns"]: r["n"] for r in records}
    assert not leaked, f"graph nodes left behind (namespace: count): {leaked}"


@pytest.fixture
def weaviate_store_factory(weaviate_client) -> Iterator[WeaviateStoreFactory]:
    """``weaviate_store_factory(prefix=None)`` -> a WeaviateStore; at teardown every collection of every prefix
    it handed out is dropped, and the test fails if one is left (whoever created it: the store, a job, a CLI)."""
    yield from _weaviate_stores(weaviate_client)


@pytest.fixture(scope="module")
def module_weaviate_store_factory(weaviate_client) -> Iterator[WeaviateStoreFactory]:
    """``weaviate_store_factory`` for module-scoped fixtures (a collection written once for read-only tests)."""
    yield from _weaviate_stores(weaviate_client)


@pytest.fixture
def neo4j_store_factory(neo4j_driver) -> Iterator[Neo4jStoreFactory]:
    """``neo4j_store_factory(namespace=None, cls=Neo4jStore, **kwargs)`` -> a Neo4jStore; at teardown every
    namespace it handed out is cleared, and the test fails if any node is left in one."""
    yield from _neo4j_stores(neo4j_driver)


@pytest.fixture(scope="module")
def module_neo4j_store_factory(neo4j_driver) -> Iterator[Neo4jStoreFactory]:
    """``neo4j_store_factory`` for module-scoped fixtures."""
    yield from _neo4j_stores(neo4j_driver)


@pytest.fixture(scope="session")
def llm_settings(settings: Settings) -> Settings:
    """Settings with the local llama-server (`ragloom stack up --llm`: built and started here when needed; left
    running like the other servers). A RAGLOOM_LLM_BASE_URL in the environment is used instead."""
    return stack.up(settings, llm=True)
