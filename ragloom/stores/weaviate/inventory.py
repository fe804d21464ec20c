"""The base of the store: collection names, and reading what is there (schema, ids, counts, a vector)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ragloom.errors import StoreError
from ragloom.metadata import MetadataLayout
from ragloom.settings import FLAT_SEARCH_CUTOFF
from ragloom.stores.weaviate.errors import store_errors

if TYPE_CHECKING:
    from ragloom.settings import Settings

ITERATOR_PAGE = 2000
FRESH_INDEX_ATTEMPTS = 5  # reads of a collection created a moment ago by another process (once_index_loaded)
T = TypeVar("T")


def once_index_loaded(read: Callable[[], T]) -> T:
    """``read()``, retried while Weaviate says the collection's index does not exist yet: a collection another
    process has just created is in the schema a moment before its index is loaded."""
    for attempt in range(1, FRESH_INDEX_ATTEMPTS):
        try:
            return read()
        except StoreError as e:
            if "non-existing index" not in str(e):
                raise
            time.sleep(0.2 * attempt)
    return read()


def default_vector(vector: Any) -> list[float] | None:
    """The object's (only or "default") vector as a list; None when it has none."""
    if vector is None:
        return None
    if isinstance(vector, Mapping):
        return vector.get("default") or next(iter(vector.values()), None)
    return list(vector)


class Inventory:
    """``client`` is a connected ``weaviate.WeaviateClient``; ``prefix`` starts every collection name
    (``Settings.collection_prefix``; tests use their own)."""

    def __init__(self, client: Any, prefix: str, *, replication_factor: int = 1,
                 write_consistency: str = "QUORUM", read_consistency: str = "QUORUM",
                 metadata: MetadataLayout | None = None) -> None:
        if not re.fullmatch(r"[A-Z][A-Za-z0-9_]*", prefix or ""):
            raise StoreError(f"collection prefix {prefix!r} must start with an upper-case letter and hold only "
                             "letters, digits and _ (Weaviate class names)")
        self.client = client
        self.prefix = prefix
        # how metadata is stored: declared keys typed, every other key text (ragloom.metadata); Settings give it
        self.metadata = metadata or MetadataLayout()
        self._known_properties: dict[str, dict[str, str]] = {}  # collection -> property -> data type
        self._bm25_analyzed: dict[str, bool] = {}  # collection -> written with the current BM25 analyzer
        self.bm25_k1, self.bm25_b = 1.2, 0.75  # BM25 parameters of the collections it creates (Settings)
        self.flat_search_cutoff = FLAT_SEARCH_CUTOFF  # Settings.weaviate_flat_search_cutoff
        self.write_requests = 1  # insert requests in flight at once per write (Settings.weaviate_write_requests)
        # processes a sync's batch writes run in (Settings.weaviate_write_processes; 1: this one); more need
        # the settings the store was connected with, for the workers' own connections
        self.write_processes = 1
        self.settings: Settings | None = None
        # Replicas of each shard for collections this store creates, and how many replicas must answer a read
        # or acknowledge a write (ONE | QUORUM | ALL; with one replica every level is the same).
        self.replication_factor = replication_factor
        self.write_consistency = write_consistency
        self.read_consistency = read_consistency

    def collection_name(self, strategy: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", strategy):
            raise StoreError(f"strategy {strategy!r} is not a valid name ([a-z][a-z0-9_]*)")
        return self.prefix + strategy.capitalize()

    def _collection(self, strategy: str, write: bool = False) -> Any:
        """The collection handle at this store's read (or write) consistency level."""
        return self._handle(self.collection_name(strategy), write)

    def _handle(self, name: str, write: bool = False) -> Any:
        """The handle of collection ``name`` at this store's read (or write) consistency level."""
        from weaviate.classes.config import ConsistencyLevel

        level = self.write_consistency if write else self.read_consistency
        return self.client.collections.use(name).with_consistency_level(ConsistencyLevel[level])

    def prefixed_collections(self) -> list[str]:
        """Every collection whose name starts with this store's prefix (chunk collections and the versions)."""
        with store_errors("list collections"):
            return [n for n in self.client.collections.list_all(simple=True) if n.startswith(self.prefix)]

    def recorded_infos(self) -> dict[str, dict[str, Any]]:
        """Collection name -> what ``ensure_collection`` recorded in its description, for this prefix's
        collections (those without a readable record are left out)."""
        infos: dict[str, dict[str, Any]] = {}
        for name in self.prefixed_collections():
            with store_errors(f"read collection config of {name}"):
                description = self.client.collections.use(name).config.get().description or ""
            try:
                info = json.loads(description)
            except ValueError:
                continue
            if isinstance(info, dict):
                infos[name] = info
        return infos

    def recorded_models(self) -> dict[str, str]:
        """Collection name -> the model id ``ensure_collection`` recorded, for this prefix's chunk collections."""
        return {name: str(info["model_id"]) for name, info in self.recorded_infos().items() if info.get("model_id")}

    def exists(self, strategy: str) -> bool:
        with store_errors("exists"):
            return bool(self.client.collections.exists(self.collection_name(strategy)))

    def collection_info(self, strategy: str) -> dict[str, Any] | None:
        """What ``ensure_collection`` recorded (strategy, dimension, model_id); None when there is no collection."""
        if not self.exists(strategy):
            return None
        with store_errors("read collection config"):
            description = self._collection(strategy).config.get().description or ""
        try:
            info = json.loads(description)
        except ValueError:
            return {}
        return info if isinstance(info, dict) else {}

    def property_types(self, strategy: str, refresh: bool = False) -> dict[str, str]:
        """Property -> Weaviate data type name ("TEXT", "INT", "DATE", "TEXT_ARRAY", ...) of the strategy's
        collection, cached; ``refresh`` re-reads it (ingestion adds meta_ properties as they appear)."""
        return dict(self._properties(self.collection_name(strategy), refresh=refresh))

    def _properties(self, name: str, refresh: bool = False) -> dict[str, str]:
        if refresh or name not in self._known_properties:
            with store_errors(f"read schema of {name}"):
                config = self.client.collections.use(name).config.get()
            self._known_properties[name] = {p.name: str(p.data_type.name) for p in config.properties}
        return self._known_properties[name]

    def chunk_index(self, strategy: str) -> dict[str, str]:
        """chunk_id -> document_id of every object (cursor API; {} when the collection does not exist)."""
        if not self.exists(strategy):
            return {}

        def read() -> dict[str, str]:
            with store_errors(f"iterate {self.collection_name(strategy)}"):
                return {obj.properties["chunk_id"]: obj.properties.get("document_id") or ""
                        for obj in self._collection(strategy).iterator(
                            return_properties=["chunk_id", "document_id"], cache_size=ITERATOR_PAGE)}

        return once_index_loaded(read)

    def count(self, strategy: str) -> int:
        if not self.exists(strategy):
            return 0

        def read() -> int:
            with store_errors(f"count {self.collection_name(strategy)}"):
                return int(self._collection(strategy).aggregate.over_all(total_count=True).total_count or 0)

        return once_index_loaded(read)

    def vector_dimension(self, strategy: str) -> int | None:
        """Length of a stored vector; None when the collection is missing or empty."""
        if not self.exists(strategy):
            return None
        with store_errors(f"read a vector of {self.collection_name(strategy)}"):
            res = self._collection(strategy).query.fetch_objects(limit=1, include_vector=True, return_properties=[])
        if not res.objects:
            return None
        vector = default_vector(res.objects[0].vector)
        return None if vector is None else len(vector)
