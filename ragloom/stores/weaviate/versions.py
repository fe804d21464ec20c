"""Version stamps: a fresh random stamp for a chunk collection after every write or delete that changed it.

Result caches key on the stamp (``ragloom.retrieval.cache``), so a change to a collection invalidates its
cached results in every process at their next lookup.

The stamps are data, one object per chunk collection in the prefix's ``<prefix>_Versions`` collection. They were
once kept in each collection's description; but every update of a collection's config briefly makes its shards
read-only (two concurrent syncs of one collection then failed with 422 "store is read-only") and, in a cluster,
goes through the Raft leader (a sync stalled for 90 s right after the leader died). An object write has neither
problem: it is an ordinary replicated write at the store's consistency level.
"""

from __future__ import annotations

import uuid

from ragloom.errors import StoreError
from ragloom.stores.weaviate.errors import store_errors
from ragloom.stores.weaviate.inventory import Inventory

# No strategy name starts with "_" (``collection_name``), so prefix + this never names a chunk collection.
VERSIONS_SUFFIX = "_Versions"


class Versions(Inventory):
    """Stamps live under ``versions_name``; the collection is created with the first chunk collection
    (``Admin.ensure_collection``, else by the first stamp) and dropped with the prefix's last chunk collection
    (``Admin.drop_collection``)."""

    _versions_ready = False  # the versions collection was seen or made by this store (no schema read per stamp)

    @property
    def versions_name(self) -> str:
        return self.prefix + VERSIONS_SUFFIX

    def _stamp_id(self, strategy: str) -> str:
        from weaviate.util import generate_uuid5

        return str(generate_uuid5(self.collection_name(strategy)))

    def collection_version(self, strategy: str) -> str:
        """The collection's current stamp; '' when there is no collection or it was never stamped (nothing
        written since it was created), which callers must not cache under. One read: a dropped collection's
        stamp is removed with it (``Admin.drop_collection``)."""
        try:
            with store_errors(f"read the version of {self.collection_name(strategy)}"):
                found = self._handle(self.versions_name).query.fetch_object_by_id(self._stamp_id(strategy))
        except StoreError:
            if self._versions_exist():
                raise
            return ""  # no stamp written under this prefix yet
        return str(found.properties.get("version") or "") if found is not None else ""

    def bump_version(self, strategy: str) -> None:
        """Give the collection a fresh stamp (an upsert of its one object in the versions collection)."""
        from weaviate.classes.data import DataObject

        name = self.collection_name(strategy)
        stamp = DataObject(properties={"collection": name, "version": uuid.uuid4().hex},
                           uuid=self._stamp_id(strategy))
        for attempt in range(2):
            self._ensure_versions()
            try:
                with store_errors(f"write a new version stamp of {name}"):
                    result = self._handle(self.versions_name, write=True).data.insert_many([stamp])
            except StoreError:
                # the prefix's last chunk collection was dropped a moment ago, and the versions with it
                self._versions_ready = False
                if attempt == 0 and not self._versions_exist():
                    continue
                raise
            if result.errors:
                raise StoreError(f"Weaviate: writing the version stamp of {name} failed: "
                                 f"{next(iter(result.errors.values())).message}")
            return

    def forget_version(self, strategy: str) -> None:
        """Remove the collection's stamp (it was dropped)."""
        if not self._versions_exist():
            return
        with store_errors(f"delete the version stamp of {self.collection_name(strategy)}"):
            self._handle(self.versions_name, write=True).data.delete_by_id(self._stamp_id(strategy))

    def _versions_exist(self) -> bool:
        with store_errors(f"exists {self.versions_name}"):
            return bool(self.client.collections.exists(self.versions_name))

    def _ensure_versions(self) -> None:
        from weaviate.classes.config import Configure, DataType, Property

        if self._versions_ready or self._versions_exist():
            self._versions_ready = True
            return
        with store_errors(f"create collection {self.versions_name}"):
            try:
                self.client.collections.create(
                    self.versions_name,
                    description="ragloom: the version stamp of each chunk collection under this prefix",
                    properties=[Property(name="collection", data_type=DataType.TEXT),
                                Property(name="version", data_type=DataType.TEXT)],
                    vector_config=Configure.Vectors.self_provided(vector_index_config=Configure.VectorIndex.flat()),
                    replication_config=Configure.replication(factor=self.replication_factor,
                                                             async_enabled=self.replication_factor > 1),
                )
            except Exception:
                if not self._versions_exist():  # else another process created it first: fine
                    raise
        self._versions_ready = True

    def _drop_versions_if_alone(self) -> None:
        """Drop the versions collection once no chunk collection under the prefix is left to stamp."""
        if set(self.prefixed_collections()) != {self.versions_name}:  # chunk collections left, or no versions
            return
        with store_errors(f"delete collection {self.versions_name}"):
            self.client.collections.delete(self.versions_name)
        self._versions_ready = False
