"""What retrieval needs from the stores, as structural types: any object with these methods will do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from ragloom.filters import Node
from ragloom.types import RetrievedItem


class VectorStore(Protocol):
    """Chunks searchable by vector and keyword, one collection per chunking strategy (``WeaviateStore``).

    ``where`` is a ``ragloom.filters`` tree; the store translates it to its own query language. Results are
    ranked from 1 and carry ``lane_scores``.
    """

    def property_types(self, strategy: str, refresh: bool = False) -> dict[str, str]:
        """Property -> data type name (TEXT, INT, NUMBER, DATE, BOOL, *_ARRAY) of the strategy's collection,
        to bind filters against; ``refresh`` re-reads it. Raises StoreError when it cannot be read."""
        ...

    def near_vector(self, strategy: str, vector: Sequence[float] | np.ndarray, k: int, where: Node | None = None,
                    include_vectors: bool = False) -> list[RetrievedItem]: ...

    def bm25(self, strategy: str, query: str, k: int, where: Node | None = None,
             include_vectors: bool = False) -> list[RetrievedItem]: ...

    def hybrid(self, strategy: str, query: str, vector: Sequence[float] | np.ndarray, k: int, alpha: float = 0.5,
               fusion: str = "relative_score", where: Node | None = None,
               include_vectors: bool = False) -> list[RetrievedItem]: ...

    def fetch(self, strategy: str, chunk_ids: Sequence[str], where: Node | None = None,
              include_vectors: bool = False) -> list[RetrievedItem]: ...


class GraphStore(Protocol):
    """Entities, relations and their chunks, scoped by visible scope paths (``Neo4jStore``)."""

    def search_entities(self, text: str, limit: int = 10,
                        scope_paths: list[str] | None = None) -> list[dict[str, Any]]: ...

    def entities_by_names(self, names: list[str], limit: int = 50,
                          scope_paths: list[str] | None = None) -> list[dict[str, Any]]: ...

    def walk(self, entity_ids: list[str], max_hops: int, relation_types: list[str] | None = None,
             limit: int = 200, scope_paths: list[str] | None = None) -> dict[str, Any]: ...

    def chunks_for_entities(self, entity_ids: list[str], strategy: str, scope_paths: list[str] | None = None,
                            limit: int = 50) -> list[tuple[str, float]]: ...
