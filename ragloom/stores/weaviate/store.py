"""``WeaviateStore``: the chunk store on Weaviate, assembled from its parts (one file per concern in this package)."""

from __future__ import annotations

from ragloom.metadata import MetadataLayout
from ragloom.settings import Settings, usable_cpus
from ragloom.stores.base import Closing
from ragloom.stores.weaviate.admin import Admin
from ragloom.stores.weaviate.connection import open_client
from ragloom.stores.weaviate.migrate import Migrate
from ragloom.stores.weaviate.reads import Reads
from ragloom.stores.weaviate.selection import Selection
from ragloom.stores.weaviate.writer_processes import default_write_processes
from ragloom.stores.weaviate.writes import default_write_requests


class WeaviateStore(Closing, Admin, Migrate, Reads, Selection):
    """One collection per chunking strategy, bring-your-own vectors (``schema``): collections created and
    dropped (``admin``), read back (``inventory``), written (``writes``), moved onto the metadata layout
    (``migrate``), searched (``reads``) and selected by filter (``selection``: deletes, counts, scope moves).

    ``client`` is a connected ``weaviate.WeaviateClient``; ``prefix`` starts every collection name
    (``Settings.collection_prefix``; tests use their own)."""

    @classmethod
    def connect(cls, settings: Settings) -> WeaviateStore:
        """A store on a client opened from settings (``connection.open_client``), closed by ``close``."""
        store = cls(open_client(settings), settings.collection_prefix,
                    replication_factor=settings.weaviate_replication_factor,
                    write_consistency=settings.weaviate_write_consistency,
                    read_consistency=settings.weaviate_read_consistency,
                    metadata=MetadataLayout.from_settings(settings))
        store._owns_connection = True
        store.bm25_k1, store.bm25_b = settings.bm25_k1, settings.bm25_b
        store.flat_search_cutoff = settings.weaviate_flat_search_cutoff
        # the cores this process may use (its CPU affinity), as extraction counts them
        store.write_requests = settings.weaviate_write_requests or default_write_requests(usable_cpus())
        store.write_processes = settings.weaviate_write_processes or default_write_processes(usable_cpus())
        store.settings = settings
        return store

    def _close_connection(self) -> None:
        self.client.close()
