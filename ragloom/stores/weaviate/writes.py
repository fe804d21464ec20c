"""Writing and deleting chunk objects: metadata typed before the write, bounded retries of failed objects."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ragloom.errors import StoreError
from ragloom.filters import META_PREFIX
from ragloom.metadata import MetadataError, coerce, stored_key
from ragloom.settings import may_start_processes
from ragloom.stores.weaviate.errors import is_weaviate_failure, store_errors
from ragloom.stores.weaviate.inventory import ITERATOR_PAGE, default_vector
from ragloom.stores.weaviate.schema import meta_property, object_properties
from ragloom.stores.weaviate.versions import Versions
from ragloom.stores.weaviate.writer_processes import WriterPool
from ragloom.types import Chunk

INSERT_BATCH = 512  # objects per gRPC insert_many request
DELETE_BATCH = 1000  # ids per delete_many filter (below the server's QUERY_MAXIMUM_RESULTS)
RETRY_DELAYS = (0.25, 0.5, 1.0)  # backoff between retries of failed objects; bounded
# ids per vector-index membership query: far below the collections' flatSearchCutoff (Weaviate's default 40000),
# so Weaviate answers it by brute force over exactly these objects' indexed vectors
INDEX_CHECK_BATCH = 1000


def default_write_requests(cpus: int | None) -> int:
    """Insert requests in flight when the settings say 0: one request keeps a 2-core Weaviate busy (2 or 4 in
    flight wrote within 5% of one there, 8 slower), while on 16 cores 8 wrote 1.28x faster than one
    (docs/experiments/2026-11-26-gpu-ingest.md). The local stack's Weaviate shares this machine's cores."""
    cpus = cpus or 1
    return 1 if cpus <= 4 else min(8, cpus // 2)


class _RequestFailed(Exception):
    """An insert request failed as a whole (no per-object errors): the server or the network is down.

    ``backed_off``: the client library already retried it with its own exponential backoff (weaviate-client
    retries an unavailable server for ~15 s per request): retrying that again would only multiply the wait
    before an outage is reported (4 attempts took over a minute), so it fails the write at once."""

    def __init__(self, message: str, backed_off: bool = False) -> None:
        super().__init__(message)
        self.backed_off = backed_off


@dataclass
class WriteResult:
    """What a write did: objects written; chunk id -> error for those that failed after retries; chunk id ->
    reason for those refused for their metadata (the writer's fault: a declared type, a cap; never retried)."""

    written: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)


def failure_message(collection: str, failed: Mapping[str, str], show: int = 5) -> str:
    """'N objects failed ...: id: error; ...' with the first few ids and messages."""
    sample = "; ".join(f"{cid}: {msg}" for cid, msg in list(failed.items())[:show])
    more = f" (and {len(failed) - show} more)" if len(failed) > show else ""
    return f"{len(failed)} object(s) could not be written to {collection} after retries: {sample}{more}"


def invalid_vectors(vectors: np.ndarray) -> dict[int, str]:
    """Row index -> why, for vectors a cosine index cannot hold (non-finite, or zero length)."""
    out: dict[int, str] = {}
    finite = np.isfinite(vectors).all(axis=1)
    norms = np.linalg.norm(np.where(np.isfinite(vectors), vectors, 0.0), axis=1)
    for i in np.flatnonzero(~finite):
        out[int(i)] = "vector has NaN or infinite components"
    for i in np.flatnonzero(finite & (norms < 1e-12)):
        out[int(i)] = "vector is all zeros (cosine distance is undefined)"
    return out


class Writes(Versions):
    """Objects are written with uuid5 of the chunk id, so a write is an idempotent upsert."""

    def upsert_chunks(self, strategy: str, chunks: list[Chunk], vectors: np.ndarray) -> int:
        """Write chunks with their vectors (idempotent: uuid5 of the chunk id); StoreError naming any that
        still fail after bounded retries, MetadataError (a ConfigError) for a chunk whose metadata is refused.
        Returns the number written."""
        result = self.write_chunks(strategy, chunks, vectors)
        if result.failed:
            raise StoreError(failure_message(self.collection_name(strategy), result.failed))
        if result.rejected:
            raise MetadataError(next(iter(result.rejected.values())))
        return result.written

    def write_chunks(self, strategy: str, chunks: list[Chunk], vectors: np.ndarray) -> WriteResult:
        """Like ``upsert_chunks`` but returns the failures instead of raising (callers that go on)."""
        from weaviate.classes.data import DataObject
        from weaviate.util import generate_uuid5

        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(chunks):
            raise StoreError(f"{len(chunks)} chunks but vectors of shape {vectors.shape}")
        if not chunks:
            return WriteResult()
        name = self.collection_name(strategy)
        # checked once per store (its schema is cached from then on): in a cluster every schema read asks the
        # Raft leader, and a batch write should not wait on one
        if name not in self._known_properties and not self.exists(strategy):
            raise StoreError(f"collection {name} does not exist: call ensure_collection first")
        rows: list[dict[str, Any] | None] = []
        rejected: dict[int, str] = {}
        for i, chunk in enumerate(chunks):
            try:
                rows.append(object_properties(chunk, self.metadata))
            except MetadataError as e:
                rows.append(None)
                rejected[i] = str(e)
        refused, unstorable = self._ensure_meta_properties(name, rows)
        rejected.update(refused)
        objects = [DataObject(properties=props or {}, uuid=generate_uuid5(c.chunk_id), vector=v.tolist())
                   for c, props, v in zip(chunks, rows, vectors, strict=True)]
        # Weaviate 1.39 stores NaN, inf and all-zero vectors without complaint and then ranks them with NaN
        # scores: refuse them here, per object, like any other failed object (no retry can fix them).
        invalid = {**invalid_vectors(vectors), **unstorable}
        pending = [i for i in range(len(objects)) if i not in invalid and i not in rejected]
        errors: dict[int, str] = {}
        unreachable = ""  # a whole request failed (server down, network): not the objects' fault
        collection = self._collection(strategy, write=True)

        def send(part: list[int]) -> tuple[dict[int, str], _RequestFailed | None]:
            try:
                return self._insert(collection, [objects[i] for i in part], part), None
            except _RequestFailed as e:
                return dict.fromkeys(part, str(e)), e

        # Up to ``write_requests`` insert requests in flight: one request keeps only part of a many-core server
        # busy (docs/experiments/2026-11-26-gpu-ingest.md). Results are taken in order, as one at a time would.
        with ThreadPoolExecutor(max_workers=max(1, self.write_requests), thread_name_prefix="weaviate-insert") as pool:
            for attempt in range(len(RETRY_DELAYS) + 1):
                if attempt:
                    time.sleep(RETRY_DELAYS[attempt - 1])
                errors, unreachable = {}, ""
                parts = [pending[begin:begin + INSERT_BATCH] for begin in range(0, len(pending), INSERT_BATCH)]
                sent = pool.map(send, parts) if self.write_requests > 1 and len(parts) > 1 else map(send, parts)
                for part_errors, failed in sent:
                    if failed is not None:
                        if failed.backed_off:
                            raise StoreError(f"Weaviate: writing to {name} failed: {failed}") from failed
                        unreachable = str(failed)
                    errors.update(part_errors)
                pending = sorted(errors)
                if not pending:
                    break
        if unreachable:
            # An outage fails the run now, loudly, instead of recording every later batch as failed objects.
            raise StoreError(f"Weaviate: writing to {name} failed after {len(RETRY_DELAYS) + 1} attempts: "
                             f"{unreachable}")
        failed = {chunks[i].chunk_id: msg for i, msg in sorted({**invalid, **errors}.items()) if i not in rejected}
        result = WriteResult(written=len(chunks) - len(failed) - len(rejected), failed=failed,
                             rejected={chunks[i].chunk_id: msg for i, msg in sorted(rejected.items())})
        if result.written:
            self.bump_version(strategy)
        return result

    def _writer_processes(self) -> int:
        """Processes a sync's batch writes may run in: ``write_processes`` where the store knows the settings
        it was connected with (the workers connect with them) and this process may start others, else 1."""
        return self.write_processes if self.settings is not None and may_start_processes() else 1

    @property
    def requests_per_write(self) -> int:
        """Insert requests one batch write keeps in flight: ``write_requests``, shared out among the writer
        processes when there are several. On the H100 machine (16 cores), 4 processes of 2 requests wrote
        1.22-1.25x as fast as one process of 2, while 4 of 8 wrote 0.99-1.09x as fast as one of 8
        (docs/experiments/2026-11-27-gpu-writer-processes.md)."""
        processes = self._writer_processes()
        return self.write_requests if processes < 2 else max(1, self.write_requests // processes)

    @contextmanager
    def batch_writer(self, strategy: str, batches: int, writes_in_flight: int = 0) -> Iterator[
            tuple[Callable[[tuple[list[Chunk], np.ndarray]], WriteResult], int, int]]:
        """How a sync sends its ``batches`` batch writes: ``(write, depth, processes)``, ``write`` taking (chunks,
        vectors), ``depth`` the writes to keep in flight at once (``writes_in_flight`` when above 0) and
        ``processes`` the processes they run in.

        With ``write_processes`` above 1 and more than one batch, each write runs in one of that many worker
        processes (``writer_processes``), one write per process at a time, each with ``requests_per_write``
        insert requests, this store's prefix and metadata layout. Otherwise in this process, two at once where
        the store sends several insert requests (one builds its objects while the other waits on Weaviate:
        docs/experiments/2026-11-26-weaviate-lean-schema.md), else one."""
        processes = self._writer_processes() if batches > 1 else 1
        if self.settings is None or processes < 2:
            yield (lambda item: self.write_chunks(strategy, *item)), (
                writes_in_flight or (2 if self.write_requests > 1 else 1)), 1
            return
        settings = replace(self.settings, collection_prefix=self.prefix,
                           weaviate_write_requests=self.requests_per_write)
        with closing(WriterPool(settings, processes, type(self), self.metadata)) as pool:
            yield (lambda item: pool.write(strategy, *item)), writes_in_flight or processes, processes

    def repair_vector_index(self, strategy: str, chunk_ids: Iterable[str] | None = None) -> int:
        """Re-index the stored objects that a filtered vector search cannot return; returns how many.
        StoreError if one stays out after bounded retries. ``chunk_ids``: check only these (a sync passes the
        ones it read from the store and wrote, so it does not list the collection again); default every object.

        Weaviate 1.39 writes an object in steps (object store, inverted indexes, vector index); a write that
        fails midway (its shard turned read-only by a concurrent collection config update, a cancelled request,
        a crash that cut the vector index's log) leaves the object stored but never returned by a vector search
        (some also miss from the inverted indexes, so filters, the scope filter of every query included, skip
        them), and rewriting it unchanged does not help: Weaviate skips the indexes for an object whose vector
        did not change. ``sync_vectors`` calls this on every run, since it never rewrites chunks it holds."""
        if not self.exists(strategy):
            return 0
        name = self.collection_name(strategy)
        collection = self._collection(strategy, write=True)
        if chunk_ids is None:
            with store_errors(f"iterate {name}"):  # the cursor reads the object store itself, not an index
                ids = [str(o.uuid) for o in collection.iterator(return_properties=[], cache_size=ITERATOR_PAGE)]
        else:
            from weaviate.util import generate_uuid5

            ids = [str(generate_uuid5(c)) for c in dict.fromkeys(chunk_ids)]
        dimension = self.vector_dimension(strategy)
        if not ids or dimension is None or not self._indexing_settled(collection):
            return 0
        missing = set(self._unindexed(name, collection, ids, dimension))
        objects: list[Any] = []
        if missing:
            # read through the cursor too: a lookup by id goes through the inverted index of ids, which the
            # failed write may not have reached
            with store_errors(f"read the unindexed objects of {name}"):
                for obj in collection.iterator(include_vector=True, cache_size=ITERATOR_PAGE):
                    if str(obj.uuid) in missing and default_vector(obj.vector):
                        objects.append(_as_data_object(obj))
                        if len(objects) == len(missing):
                            break
        if not objects:
            return 0
        errors = self._reindex(name, collection, objects)
        if errors:
            raise StoreError(failure_message(name, errors))
        self.bump_version(strategy)
        return len(objects)

    @staticmethod
    def _indexing_settled(collection: Any) -> bool:
        """Every shard READY with no vectors waiting in its indexing queue (servers with ASYNC_INDEXING): only
        then does a vector missing from the index mean a lost one rather than one not indexed yet. False when
        the server cannot tell (a node down): the repair waits for the next sync rather than fail this one."""
        try:
            shards = collection.config.get_shards()
        except Exception as e:
            if is_weaviate_failure(e):
                return False
            raise
        return all(shard.status == "READY" and not shard.vector_queue_size for shard in shards)

    def _unindexed(self, name: str, collection: Any, ids: list[str], dimension: int) -> list[str]:
        """The ids whose objects a filtered vector search cannot return: absent, not in the vector index, or not
        in the inverted index of ids (a write that failed before the vector index may have failed there too)."""
        from weaviate.classes.query import Filter

        probe = [1.0] * dimension  # any non-zero vector: every object allowed by the filter is ranked
        found: set[str] = set()
        for begin in range(0, len(ids), INDEX_CHECK_BATCH):
            part = ids[begin:begin + INDEX_CHECK_BATCH]
            with store_errors(f"check the vector index of {name}"):
                res = collection.query.near_vector(near_vector=probe, limit=len(part),
                                                   filters=Filter.by_id().contains_any(part), return_properties=[])
            found.update(str(o.uuid) for o in res.objects)
        return [i for i in ids if i not in found]

    def _reindex(self, name: str, collection: Any, objects: list[Any]) -> dict[str, str]:
        """Put these stored objects (missing from the vector index) into it; returns uuid -> error for those
        that still are not after bounded retries.

        Each is written with its vector doubled (a changed vector: Weaviate gives the object a new doc id and
        indexes it, vector and properties; cosine ranks it as before), then with its own vector again (changed
        again: indexed again). The object stays stored throughout."""
        from weaviate.classes.data import DataObject

        by_id = {str(o.uuid): o for o in objects}
        dimension = len(objects[0].vector)
        todo = list(by_id)
        errors: dict[str, str] = {}
        for attempt in range(len(RETRY_DELAYS) + 1):
            if attempt:
                time.sleep(RETRY_DELAYS[attempt - 1])
            errors = {}
            for scale in (2.0, 1.0):
                batch = [DataObject(properties=by_id[u].properties, uuid=u,
                                    vector=[scale * x for x in by_id[u].vector]) for u in todo]
                for begin in range(0, len(batch), INSERT_BATCH):
                    part = todo[begin:begin + INSERT_BATCH]
                    try:
                        failed = self._insert(collection, batch[begin:begin + INSERT_BATCH], list(range(len(part))))
                    except _RequestFailed as e:
                        failed = dict.fromkeys(range(len(part)), str(e))
                    errors.update({part[i]: msg for i, msg in failed.items()})
            rewritten = [u for u in todo if u not in errors]  # a failed one may hold its doubled vector: again
            todo = [u for u in todo if u in errors] + self._unindexed(name, collection, rewritten, dimension)
            if not todo:
                return {}
        return {u: errors.get(u, "stored, but Weaviate did not index its vector") for u in todo}

    @staticmethod
    def _insert(collection: Any, objects: list[Any], indexes: list[int]) -> dict[int, str]:
        """One insert_many; returns original index -> error message for the objects that failed."""
        from weaviate.exceptions import WeaviateInsertManyAllFailedError, WeaviateRetryError

        try:
            result = collection.data.insert_many(objects)
        except WeaviateInsertManyAllFailedError as e:
            if len(objects) == 1:
                return {indexes[0]: str(e).removeprefix("Every object failed during insertion. ")}
            # The exception does not say which error is whose: one request per object tells us exactly.
            errors: dict[int, str] = {}
            for obj, index in zip(objects, indexes, strict=True):
                errors.update(Writes._insert(collection, [obj], [index]))
            return errors
        except Exception as e:
            if is_weaviate_failure(e):
                # the whole request failed: retry all, unless the client already did
                raise _RequestFailed(f"{type(e).__name__}: {e}", backed_off=isinstance(e, WeaviateRetryError)) from e
            raise
        return {indexes[i]: err.message for i, err in result.errors.items()}

    def _ensure_meta_properties(self, name: str, rows: list[dict[str, Any] | None]) -> tuple[dict[int, str],
                                                                                          dict[int, str]]:
        """Add the meta_ properties these rows bring (typed as ``MetadataLayout`` types their keys, never from
        the values); undeclared ones up to the layout's ``max_properties``. Returns (rejected, failed), row
        index -> why: a row that needs a property past the cap is rejected (the writer's 400); a row that a
        collection built before the layout cannot hold fails, naming the migration (``migrate.py``)."""
        layout = self.metadata
        known = self._properties(name)
        wanted = sorted({k for row in rows if row for k in row if k.startswith(META_PREFIX)} - set(known))
        if wanted:
            known = self._properties(name, refresh=True)  # another writer may have added them meanwhile
            wanted = [k for k in wanted if k not in known]
        room = layout.max_properties - sum(1 for k in known if k.startswith(META_PREFIX)
                                           and not layout.is_declared(k))
        undeclared = [k for k in wanted if not layout.is_declared(k)]
        for key in [k for k in wanted if layout.is_declared(k)] + undeclared[:max(room, 0)]:
            with store_errors(f"add property {key} to {name}"):
                try:
                    self.client.collections.use(name).config.add_property(meta_property(key, layout.type_of(key)))
                except Exception:
                    if key not in self._properties(name, refresh=True):
                        raise
        if wanted:
            known = self._properties(name, refresh=True)
        rejected: dict[int, str] = {}
        failed: dict[int, str] = {}
        for i, row in enumerate(rows):
            if row is None:
                continue
            for key in [k for k in row if k.startswith(META_PREFIX)]:
                if key not in known:
                    rejected[i] = (f"metadata {stored_key(key)!r}: no new metadata keys are accepted, this "
                                   f"collection holds the most it may ({layout.max_properties}, "
                                   "RAGLOOM_METADATA_MAX_PROPERTIES)")
                    break
                if known[key] != layout.type_of(key):
                    legacy = _legacy_value(row[key], known[key])
                    if legacy is None:
                        failed[i] = (f"metadata {stored_key(key)!r}: collection {name} predates the metadata "
                                     "layout; the operator runs `ragloom metadata migrate` (docs/design/metadata.md)")
                        break
                    row[key] = legacy
        return rejected, failed

    def delete_chunks(self, strategy: str, chunk_ids: Iterable[str]) -> int:
        """Delete objects by chunk id (batched by uuid); returns how many were deleted."""
        from weaviate.classes.query import Filter
        from weaviate.util import generate_uuid5

        ids = list(dict.fromkeys(chunk_ids))
        if not ids or not self.exists(strategy):
            return 0
        collection = self._collection(strategy, write=True)
        deleted = 0
        for begin in range(0, len(ids), DELETE_BATCH):
            uuids = [generate_uuid5(cid) for cid in ids[begin:begin + DELETE_BATCH]]
            with store_errors(f"delete from {self.collection_name(strategy)}"):
                result = collection.data.delete_many(where=Filter.by_id().contains_any(uuids))
            if result.failed:
                raise StoreError(f"Weaviate could not delete {result.failed} of {len(uuids)} objects from "
                                 f"{self.collection_name(strategy)}")
            deleted += int(result.successful)
            if result.successful < len(uuids):
                # delete_many finds objects through the id index; an object whose index write failed (a shard
                # briefly read-only under concurrent writes) is stored yet not matched. Delete the rest by id,
                # which reads the object store itself; ids that are really gone answer False.
                with store_errors(f"delete from {self.collection_name(strategy)}"):
                    deleted += sum(bool(collection.data.delete_by_id(u)) for u in uuids
                                   if collection.data.exists(u))
        if deleted:
            self.bump_version(strategy)
        return deleted


def _legacy_value(value: Any, legacy_type: str) -> Any:
    """A value as the layout stores it (texts, for an undeclared key), fitted into a property an older layout
    typed otherwise; None if it does not fit: ``["3"]`` into an INT is 3, ``["high"]`` is None."""
    scalar = legacy_type.removesuffix("_ARRAY")
    items = value if isinstance(value, list) else [value]
    if not legacy_type.endswith("_ARRAY"):
        if len(items) != 1:
            return None
        items = items[:1]
    fitted = []
    for item in items:
        if isinstance(item, str) and scalar in ("INT", "NUMBER", "BOOL"):
            item = _parsed_text(item)
        try:
            fitted.append(coerce(item, scalar))
        except ValueError:
            return None
    return fitted if legacy_type.endswith("_ARRAY") else fitted[0]


def _parsed_text(text: str) -> Any:
    """What ``as_text`` made a number or a boolean into, back again; other text as it is."""
    if text in ("true", "false"):
        return text == "true"
    try:
        number = float(text)
    except ValueError:
        return text
    return int(text) if re.fullmatch(r"-?\d+", text) else number


def _as_data_object(obj: Any) -> Any:
    """A fetched object as the ``DataObject`` that writes it back unchanged (properties, vector, uuid)."""
    from weaviate.classes.data import DataObject

    properties = {k: v for k, v in obj.properties.items() if v is not None}
    return DataObject(properties=properties, uuid=obj.uuid, vector=[float(x) for x in default_vector(obj.vector)])
