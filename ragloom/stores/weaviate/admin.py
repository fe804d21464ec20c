"""Creating and dropping a store's collections."""

from __future__ import annotations

import json

from ragloom.errors import StoreError
from ragloom.stores.weaviate.errors import store_errors
from ragloom.stores.weaviate.inventory import Inventory
from ragloom.stores.weaviate.schema import core_properties


class Admin(Inventory):
    """Collections are created with the core schema (``schema.core_properties``) and dropped by name or prefix."""

    def ensure_collection(self, strategy: str, dimension: int, model_id: str = "") -> None:
        """Create the strategy's collection when missing; an existing one must hold vectors of ``dimension``
        (and of ``model_id``, when given and recorded), else StoreError: drop it first to change models."""
        from weaviate.classes.config import Configure, VectorDistances

        name = self.collection_name(strategy)
        if self.exists(strategy):
            info = self.collection_info(strategy) or {}
            stored_dim = info.get("dimension") or self.vector_dimension(strategy)
            if stored_dim not in (None, dimension):
                raise StoreError(f"collection {name} holds {stored_dim}-dimensional vectors, not {dimension}: "
                                 "the embedding model changed; drop the collection to re-index")
            if model_id and info.get("model_id") and info["model_id"] != model_id:
                raise StoreError(f"collection {name} was indexed with {info['model_id']!r}, not {model_id!r}: "
                                 "drop the collection to re-index")
            return
        description = json.dumps({"ragloom": "chunks", "strategy": strategy, "dimension": dimension,
                                  "model_id": model_id})
        with store_errors(f"create collection {name}"):
            try:
                self.client.collections.create(
                    name,
                    description=description,
                    properties=core_properties(),
                    vector_config=Configure.Vectors.self_provided(
                        vector_index_config=Configure.VectorIndex.hnsw(distance_metric=VectorDistances.COSINE)),
                    inverted_index_config=Configure.inverted_index(index_null_state=True),
                )
            except Exception:
                if self.exists(strategy):  # another process created it first: fine
                    return
                raise
        self._known_properties.pop(name, None)

    def drop_collection(self, strategy: str) -> None:
        name = self.collection_name(strategy)
        with store_errors(f"delete collection {name}"):
            self.client.collections.delete(name)
        self._known_properties.pop(name, None)

    def drop_collections(self) -> list[str]:
        """Delete every collection whose name starts with this store's prefix; returns their names."""
        with store_errors("list collections"):
            names = [n for n in self.client.collections.list_all(simple=True) if n.startswith(self.prefix)]
        for name in names:
            with store_errors(f"delete collection {name}"):
                self.client.collections.delete(name)
            self._known_properties.pop(name, None)
        return names
