"""Weaviate operations of the query service that select by filter rather than chunk id: deleting injected
items, sweeping expired ones, and moving a document to another scope (promotion) without re-embedding.
``where`` is a ``ragloom.filters`` tree, translated here like every store read."""

from __future__ import annotations

from typing import Any

from ragloom.filters import Node
from ragloom.stores.weaviate import WeaviateStore, to_weaviate
from ragloom.stores.weaviate.errors import store_errors
from ragloom.types import Scope

PAGE = 1000


def delete_where(store: WeaviateStore, strategy: str, where: Node) -> int:
    """Delete every object of ``strategy``'s collection matching ``where``; returns how many went."""
    if not store.exists(strategy):
        return 0
    name = store.collection_name(strategy)
    with store_errors(f"delete from {name}"):
        result = store.client.collections.use(name).data.delete_many(where=to_weaviate(where))
    return int(result.successful)


def rescope(store: WeaviateStore, strategy: str, where: Node, scope: Scope) -> int:
    """Set the scope of every object matching ``where`` (vectors untouched); returns how many moved."""
    if not store.exists(strategy):
        return 0
    name = store.collection_name(strategy)
    collection = store.client.collections.use(name)
    props = {"scope_path": scope.path, "scope_tenant": scope.tenant, "scope_user": scope.user,
             "scope_chat": scope.chat, "scope_agent": scope.agent}
    moved = 0
    while True:  # each pass moves what it fetched, so the next pass sees only the rest
        with store_errors(f"read {name} for a scope move"):
            res = collection.query.fetch_objects(filters=to_weaviate(where), limit=PAGE, return_properties=["chunk_id"])
        if not res.objects:
            return moved
        with store_errors(f"move objects of {name} to scope {scope.path}"):
            for obj in res.objects:
                collection.data.update(uuid=obj.uuid, properties=props)
        moved += len(res.objects)


def count_where(store: WeaviateStore, strategy: str, where: Node) -> int:
    if not store.exists(strategy):
        return 0
    name = store.collection_name(strategy)
    with store_errors(f"count in {name}"):
        res = store.client.collections.use(name).aggregate.over_all(filters=to_weaviate(where), total_count=True)
    return int(res.total_count or 0)


def scope_paths_where(store: WeaviateStore, strategy: str, where: Node, limit: int = 10_000) -> set[str]:
    """The distinct ``scope_path`` values of the objects matching ``where``."""
    if not store.exists(strategy):
        return set()
    name = store.collection_name(strategy)
    with store_errors(f"read {name}"):
        res = store.client.collections.use(name).query.fetch_objects(filters=to_weaviate(where), limit=limit,
                                                                      return_properties=["scope_path"])
    return {str(o.properties.get("scope_path", "")) for o in res.objects}


def weaviate_ready(store: WeaviateStore) -> bool:
    try:
        return bool(store.client.is_ready())
    except Exception:  # any failure to answer is "not ready"
        return False


def neo4j_ready(store: Any) -> bool:
    try:
        store.driver.verify_connectivity()
        return True
    except Exception:
        return False
