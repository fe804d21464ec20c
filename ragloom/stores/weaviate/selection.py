"""Operations that select chunks by filter rather than by id: deleting injected or expired items, counting, and
moving documents to another scope (promotion) without re-embedding. ``where`` is a ``ragloom.filters`` tree."""

from __future__ import annotations

from ragloom.filters import Node
from ragloom.stores.weaviate.errors import store_errors
from ragloom.stores.weaviate.filters import to_weaviate
from ragloom.stores.weaviate.inventory import Inventory
from ragloom.types import Scope

PAGE = 1000


class Selection(Inventory):
    def delete_where(self, strategy: str, where: Node) -> int:
        """Delete every object of ``strategy``'s collection matching ``where``; returns how many went."""
        if not self.exists(strategy):
            return 0
        name = self.collection_name(strategy)
        with store_errors(f"delete from {name}"):
            result = self.client.collections.use(name).data.delete_many(where=to_weaviate(where))
        return int(result.successful)

    def rescope(self, strategy: str, where: Node, scope: Scope) -> int:
        """Set the scope of every object matching ``where`` (vectors untouched); returns how many moved."""
        if not self.exists(strategy):
            return 0
        name = self.collection_name(strategy)
        collection = self.client.collections.use(name)
        props = {"scope_path": scope.path, "scope_tenant": scope.tenant, "scope_user": scope.user,
                 "scope_chat": scope.chat, "scope_agent": scope.agent}
        moved = 0
        while True:  # each pass moves what it fetched, so the next pass sees only the rest
            with store_errors(f"read {name} for a scope move"):
                res = collection.query.fetch_objects(filters=to_weaviate(where), limit=PAGE,
                                                     return_properties=["chunk_id"])
            if not res.objects:
                return moved
            with store_errors(f"move objects of {name} to scope {scope.path}"):
                for obj in res.objects:
                    collection.data.update(uuid=obj.uuid, properties=props)
            moved += len(res.objects)

    def count_where(self, strategy: str, where: Node) -> int:
        if not self.exists(strategy):
            return 0
        name = self.collection_name(strategy)
        with store_errors(f"count in {name}"):
            res = self.client.collections.use(name).aggregate.over_all(filters=to_weaviate(where), total_count=True)
        return int(res.total_count or 0)

    def scope_paths_where(self, strategy: str, where: Node, limit: int = 10_000) -> set[str]:
        """The distinct ``scope_path`` values of the objects matching ``where``."""
        if not self.exists(strategy):
            return set()
        name = self.collection_name(strategy)
        with store_errors(f"read {name}"):
            res = self.client.collections.use(name).query.fetch_objects(filters=to_weaviate(where), limit=limit,
                                                                        return_properties=["scope_path"])
        return {str(o.properties.get("scope_path", "")) for o in res.objects}

    def ready(self) -> bool:
        """Whether the server answers (health checks): any failure to answer is "not ready"."""
        try:
            return bool(self.client.is_ready())
        except Exception:  # noqa: BLE001 - a health probe: every failure means not ready
            return False
