"""Chunks and their vectors in Weaviate.

errors      is_weaviate_failure, store_errors: the one classifier of Weaviate failures -> StoreError
schema      core properties; user metadata as ragloom.metadata lays it out (pure)
filters     to_weaviate: the ``ragloom.filters`` tree as a Weaviate filter (pure)
connection  open_client(settings): local stack, self-hosted URL or Weaviate Cloud
inventory   collection names, schema (property_types), ids, counts
versions    collection_version / bump_version: a stamp per collection, changed by every write (result caches)
admin       ensure_collection, drop_collection(s)
writes      upsert_chunks / write_chunks (metadata as laid out, bounded retries), delete_chunks
migrate     migrate_metadata: a collection built before the metadata layout, copied onto it
reads       near_vector, bm25, hybrid, fetch: each takes the filter tree as ``where``
store       WeaviateStore: all of the above on one client
"""

from ragloom.stores.weaviate.filters import to_weaviate
from ragloom.stores.weaviate.schema import CORE_PROPERTIES
from ragloom.stores.weaviate.store import WeaviateStore
from ragloom.stores.weaviate.writes import WriteResult, failure_message

__all__ = ["CORE_PROPERTIES", "WeaviateStore", "WriteResult", "failure_message", "to_weaviate"]
