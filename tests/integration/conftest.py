"""Integration fixtures: the real local Weaviate and Neo4j, started through `ragloom.stack` if not up.

Every test gets its own collection prefix / graph namespace from `namespace` and cleans up after itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from ragloom import stack
from ragloom.settings import Settings


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


@pytest.fixture
def namespace() -> str:
    """A unique name for this test's collections (Weaviate prefix) and graph namespace."""
    return f"Test{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def llm_settings(settings: Settings) -> Settings:
    """Settings with the local llama-server (`ragloom stack up --llm`: built and started here when needed; left
    running like the other servers). A RAGLOOM_LLM_BASE_URL in the environment is used instead."""
    return stack.up(settings, llm=True)
