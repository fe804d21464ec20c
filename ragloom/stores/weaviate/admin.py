"""Creating and dropping a store's collections."""

from __future__ import annotations

import json

from ragloom.embedding.base import same_family
from ragloom.errors import StoreError
from ragloom.stores.analysis import ANALYZER
from ragloom.stores.weaviate.errors import store_errors
from ragloom.stores.weaviate.schema import core_properties
from ragloom.stores.weaviate.versions import Versions


class Admin(Versions):
    """Collections are created with the core schema (``schema.core_properties``) and dropped by name or prefix."""

    def ensure_collection(self, strategy: str, dimension: int, model_id: str = "") -> None:
        """Create the strategy's collection when missing; an existing one must hold vectors of ``dimension``
        (and of ``model_id``'s family, when given and recorded: another backend of the same model is fine), else
        StoreError: drop it first to change models.
        The prefix's versions collection is ensured here too, so that writes change no schema (in a cluster a
        schema change waits on the Raft leader: 90 s when it has just died)."""
        from weaviate.classes.config import Configure, VectorDistances

        name = self.collection_name(strategy)
        self._ensure_versions()
        if self.exists(strategy):
            info = self.collection_info(strategy) or {}
            stored_dim = info.get("dimension") or self.vector_dimension(strategy)
            if stored_dim not in (None, dimension):
                raise StoreError(f"collection {name} holds {stored_dim}-dimensional vectors, not {dimension}: "
                                 "the embedding model changed; drop the collection to re-index")
            if model_id and info.get("model_id") and not same_family(info["model_id"], model_id):
                raise StoreError(f"collection {name} was indexed with {info['model_id']!r}, not {model_id!r} "
                                 "(another model, not another backend of it): drop the collection to re-index")
            wanted = self._search_parameters()
            if info and {key: info.get(key) for key in wanted} != wanted:
                self._set_search_parameters(strategy, info)
            return
        description = json.dumps({"ragloom": "chunks", "strategy": strategy, "dimension": dimension,
                                  "model_id": model_id, "bm25": ANALYZER, **self._search_parameters()})
        with store_errors(f"create collection {name}"):
            try:
                self.client.collections.create(
                    name,
                    description=description,
                    properties=core_properties(),
                    vector_config=Configure.Vectors.self_provided(
                        vector_index_config=Configure.VectorIndex.hnsw(distance_metric=VectorDistances.COSINE,
                                                                       flat_search_cutoff=self.flat_search_cutoff)),
                    inverted_index_config=Configure.inverted_index(index_null_state=True, bm25_k1=self.bm25_k1,
                                                                   bm25_b=self.bm25_b),
                    # with replicas, async replication repairs a node that missed writes while it was down
                    replication_config=Configure.replication(factor=self.replication_factor,
                                                             async_enabled=self.replication_factor > 1),
                )
            except Exception:
                if self.exists(strategy):  # another process created it first: fine
                    return
                raise
        self._known_properties.pop(name, None)
        self._bm25_analyzed.pop(name, None)

    def _search_parameters(self) -> dict[str, float | int]:
        """This store's search parameters, as a collection's description records them: BM25 k1 and b, and the
        flat-search cutoff."""
        return {"bm25_k1": self.bm25_k1, "bm25_b": self.bm25_b, "flat_search_cutoff": self.flat_search_cutoff}

    def _set_search_parameters(self, strategy: str, info: dict) -> None:
        """Apply this store's search parameters to an existing collection (Weaviate changes them in place)."""
        from weaviate.classes.config import Reconfigure

        info = {**info, **self._search_parameters()}
        with store_errors(f"update search parameters of {self.collection_name(strategy)}"):
            self._collection(strategy).config.update(
                inverted_index_config=Reconfigure.inverted_index(bm25_k1=self.bm25_k1, bm25_b=self.bm25_b),
                vector_config=Reconfigure.Vectors.update(
                    name="default",  # Configure.Vectors.self_provided() without a name
                    vector_index_config=Reconfigure.VectorIndex.hnsw(flat_search_cutoff=self.flat_search_cutoff)),
                description=json.dumps(info))

    def drop_collection(self, strategy: str) -> None:
        name = self.collection_name(strategy)
        self.forget_version(strategy)
        with store_errors(f"delete collection {name}"):
            self.client.collections.delete(name)
        self._known_properties.pop(name, None)
        self._bm25_analyzed.pop(name, None)
        self._drop_versions_if_alone()

    def drop_collections(self) -> list[str]:
        """Delete every collection whose name starts with this store's prefix; returns their names."""
        names = self.prefixed_collections()
        for name in names:
            with store_errors(f"delete collection {name}"):
                self.client.collections.delete(name)
            self._known_properties.pop(name, None)
            self._bm25_analyzed.pop(name, None)
        self._versions_ready = False
        return names
