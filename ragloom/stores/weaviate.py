"""Chunks and their vectors in Weaviate: one collection per chunking strategy, bring-your-own vectors.

Schema. Each strategy gets ``<prefix><Strategy>`` (e.g. ``RagloomRecursive``), HNSW with cosine distance,
no vectorizer. Ids, paths and scope fields use FIELD tokenization (exact filters); ``text`` and
``heading_path`` (" > "-joined) use WORD tokenization and carry BM25; ``embed_text`` is stored only.
Object UUIDs are uuid5 of the chunk id, so writing a chunk twice overwrites it. The collection's
description records the model id and dimension of its vectors, so a model change is detectable.

User metadata. ``chunk.metadata`` is flattened into properties named ``meta_<key>`` (nested dicts joined
with ``_``; keys lower-cased, anything outside ``[a-z0-9_]`` becomes ``_``, so ``"Review Status"`` and
``"review-status"`` both land in ``meta_review_status``). ``title`` and ``source_path`` are not user
metadata: they fill the core properties of the same name. Types are inferred from the values and the
properties are added to the schema before the write (never left to auto-schema):

======================================  ======================  ========================================
value                                   Weaviate type           note
======================================  ======================  ========================================
bool                                    BOOL
int / float                             INT / NUMBER            ints and floats mixed -> NUMBER
datetime, date, RFC 3339 / ISO date str DATE                    naive values are taken as UTC
other str                               TEXT (FIELD)            exact match; ``Like`` for patterns
list of str / of numbers / of bools     TEXT_ARRAY / NUMBER_ARRAY / INT_ARRAY / BOOL_ARRAY
anything else                           TEXT (its ``str``)
======================================  ======================  ========================================

A key seen with different kinds of values gets the widest type that holds them all (mixed scalars ->
TEXT, arrays -> TEXT_ARRAY). Once a property exists its type is fixed: a later value that cannot be
stored losslessly in it (text into a DATE, a fraction into an INT) is a StoreError naming the key and
the chunk, raised before anything is written. ``None``, NaN and empty lists are left out.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, TypeVar
from urllib.parse import urlparse

import numpy as np

from ragloom.errors import StoreError
from ragloom.settings import Settings
from ragloom.types import Chunk, RetrievedItem

META_PREFIX = "meta_"
HEADING_SEPARATOR = " > "
BM25_PROPERTIES = ["text", "heading_path"]
INSERT_BATCH = 512  # objects per gRPC insert_many request
DELETE_BATCH = 1000  # ids per delete_many filter (below the server's QUERY_MAXIMUM_RESULTS)
FETCH_BATCH = 1000
RETRY_DELAYS = (0.25, 0.5, 1.0)  # backoff between retries of failed objects; bounded
ITERATOR_PAGE = 2000
FRESH_INDEX_ATTEMPTS = 5  # reads of a collection created a moment ago by another process (_once_index_loaded)
T = TypeVar("T")

# name -> (data type name, tokenization or None, searchable, filterable)
CORE_PROPERTIES: dict[str, tuple[str, str | None, bool, bool]] = {
    "chunk_id": ("TEXT", "FIELD", False, True),
    "document_id": ("TEXT", "FIELD", False, True),
    "strategy": ("TEXT", "FIELD", False, True),
    "parent_id": ("TEXT", "FIELD", False, True),
    "level": ("INT", None, False, True),
    "position": ("INT", None, False, True),
    "start": ("INT", None, False, True),
    "end": ("INT", None, False, True),
    "token_count": ("INT", None, False, True),
    "heading_path": ("TEXT", "WORD", True, True),
    "heading_parts": ("TEXT_ARRAY", "FIELD", False, True),  # exact round trip of the path's pieces
    "title": ("TEXT", "FIELD", False, True),
    "source_path": ("TEXT", "FIELD", False, True),
    "scope_path": ("TEXT", "FIELD", False, True),
    "scope_tenant": ("TEXT", "FIELD", False, True),
    "scope_user": ("TEXT", "FIELD", False, True),
    "scope_chat": ("TEXT", "FIELD", False, True),
    "scope_agent": ("TEXT", "FIELD", False, True),
    "text": ("TEXT", "WORD", True, True),
    "embed_text": ("TEXT", "WORD", False, False),
}
RESERVED_METADATA = ("title", "source_path")  # chunk.metadata keys that fill core properties
RETURN_PROPERTIES = None  # every property: meta_ ones appear as ingestion adds them; a named list would go stale

_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}([Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?)?$")
_KEY_JUNK = re.compile(r"[^a-z0-9_]+")


def _is_weaviate_error(e: BaseException) -> bool:
    from weaviate.exceptions import WeaviateBaseError

    return isinstance(e, WeaviateBaseError | OSError)


@contextmanager
def _store_errors(what: str) -> Iterator[None]:
    """Weaviate's exceptions (and gRPC/socket ones) re-raised as StoreError naming the operation."""
    try:
        yield
    except StoreError:
        raise
    except Exception as e:
        if _is_weaviate_error(e) or type(e).__module__.startswith(("grpc", "httpx", "weaviate")):
            raise StoreError(f"Weaviate {what} failed: {e}") from e
        raise


def _once_index_loaded(read: Callable[[], T]) -> T:
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


# ---------------------------------------------------------------------------------------------------
# metadata flattening (pure)


def meta_property_name(key: str) -> str:
    """``meta_<key>`` with the key lower-cased and reduced to [a-z0-9_]."""
    clean = _KEY_JUNK.sub("_", str(key).lower()).strip("_") or "_"
    return META_PREFIX + clean


def _parse_date(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str) and _RFC3339.match(value.strip()):
        try:
            parsed = datetime.fromisoformat(value.strip().replace("z", "Z"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def _scalar_type(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "BOOL"
    if isinstance(value, int):
        return "INT"
    if isinstance(value, float):
        return None if not math.isfinite(value) else "NUMBER"
    if _parse_date(value) is not None:
        return "DATE"
    return "TEXT"


def infer_type(value: Any) -> str | None:
    """The Weaviate data type name for one metadata value; None when it is left out."""
    if isinstance(value, list | tuple | set | frozenset):
        kinds = {_scalar_type(v) for v in value} - {None}
        if not kinds:
            return None
        if kinds == {"BOOL"}:
            return "BOOL_ARRAY"
        if kinds == {"INT"}:
            return "INT_ARRAY"
        if kinds <= {"INT", "NUMBER"}:
            return "NUMBER_ARRAY"
        return "TEXT_ARRAY"
    return _scalar_type(value)


def widen(types: set[str]) -> str:
    """One type that holds values of all these types."""
    if len(types) == 1:
        return next(iter(types))
    if types <= {"INT", "NUMBER"}:
        return "NUMBER"
    if types <= {"INT_ARRAY", "NUMBER_ARRAY"}:
        return "NUMBER_ARRAY"
    if any(t.endswith("_ARRAY") for t in types):
        return "TEXT_ARRAY"
    return "TEXT"


def flatten_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """User metadata as ``{meta_<key>: value}``; nested mappings become ``meta_<outer>_<inner>``."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(f"{prefix}_{k}" if prefix else str(k), v)
        elif value is not None:
            out[meta_property_name(prefix)] = value

    for key, value in metadata.items():
        if key not in RESERVED_METADATA:
            walk(str(key), value)
    return out


def coerce(value: Any, data_type: str) -> Any:
    """``value`` stored losslessly as ``data_type``; raises ValueError when it cannot be."""
    if data_type.endswith("_ARRAY"):
        items = value if isinstance(value, list | tuple | set | frozenset) else [value]
        scalar = data_type.removesuffix("_ARRAY")
        return [coerce(v, scalar) for v in items if _scalar_type(v) is not None]
    if data_type == "TEXT":
        return value if isinstance(value, str) else str(value)
    if data_type == "BOOL" and isinstance(value, bool):
        return value
    if data_type == "NUMBER" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if data_type == "INT" and not isinstance(value, bool):
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return int(value)
    if data_type == "DATE":
        parsed = _parse_date(value)
        if parsed is not None:
            return parsed
    raise ValueError(f"{value!r} ({type(value).__name__}) cannot be stored in a {data_type} property")


# ---------------------------------------------------------------------------------------------------


class _RequestFailed(Exception):
    """An insert request failed as a whole (no per-object errors): the server or the network is down."""


@dataclass
class WriteResult:
    """What a write did: objects written, and chunk id -> error for those that failed after retries."""

    written: int = 0
    failed: dict[str, str] = field(default_factory=dict)


def _api_key(settings: Settings) -> str:
    """The configured key, else the one the local stack generated (mirrors resolved_neo4j_password)."""
    if settings.weaviate_api_key or settings.weaviate_url:
        return settings.weaviate_api_key
    generated = settings.stack_dir / "weaviate.api_key"
    return generated.read_text().strip() if generated.exists() else ""


class WeaviateStore:
    """The only code that talks to Weaviate for chunks. ``client`` is a connected ``weaviate.WeaviateClient``;
    ``prefix`` starts every collection name (``Settings.collection_prefix``; tests use their own)."""

    def __init__(self, client: Any, prefix: str) -> None:
        if not re.fullmatch(r"[A-Z][A-Za-z0-9_]*", prefix or ""):
            raise StoreError(f"collection prefix {prefix!r} must start with an upper-case letter and hold only "
                             "letters, digits and _ (Weaviate class names)")
        self.client = client
        self.prefix = prefix
        self._owns_client = False
        self._known_properties: dict[str, dict[str, str]] = {}  # collection -> property -> data type

    # connection ------------------------------------------------------------------------------------
    @classmethod
    def connect(cls, settings: Settings) -> WeaviateStore:
        """Connect to the local stack (host/ports from settings) or to ``settings.weaviate_url``.

        A URL on weaviate.cloud / weaviate.network / wcs.api is a Weaviate Cloud cluster; any other URL
        is a self-hosted server reached over HTTP(S) at that URL and gRPC at the same host on
        ``weaviate_grpc_port`` (TLS when the URL is https).
        """
        import weaviate
        from weaviate.classes.init import Auth

        key = _api_key(settings)
        auth = Auth.api_key(key) if key else None
        where = settings.weaviate_url or (f"http://{settings.weaviate_host}:{settings.weaviate_http_port} "
                                          f"(gRPC {settings.weaviate_grpc_port})")
        try:
            if not settings.weaviate_url:
                client = weaviate.connect_to_local(host=settings.weaviate_host, port=settings.weaviate_http_port,
                                                   grpc_port=settings.weaviate_grpc_port, auth_credentials=auth)
            else:
                url = urlparse(settings.weaviate_url if "://" in settings.weaviate_url
                               else f"https://{settings.weaviate_url}")
                host = url.hostname or ""
                if any(host.endswith(s) for s in (".weaviate.cloud", ".weaviate.network", ".wcs.api")):
                    if auth is None:
                        raise StoreError(f"RAGLOOM_WEAVIATE_URL={settings.weaviate_url} is a Weaviate Cloud "
                                         "cluster: set RAGLOOM_WEAVIATE_API_KEY")
                    client = weaviate.connect_to_weaviate_cloud(cluster_url=settings.weaviate_url,
                                                                auth_credentials=auth)
                else:
                    secure = url.scheme == "https"
                    client = weaviate.connect_to_custom(
                        http_host=host, http_port=url.port or (443 if secure else 80), http_secure=secure,
                        grpc_host=host, grpc_port=settings.weaviate_grpc_port, grpc_secure=secure,
                        auth_credentials=auth)
        except StoreError:
            raise
        except Exception as e:  # connect_* raise startup, connection, auth and gRPC errors alike
            raise StoreError(f"Weaviate at {where} is unreachable or refused the connection "
                             f"({type(e).__name__}: {e}); for the local stack run `ragloom stack up`") from e
        store = cls(client, settings.collection_prefix)
        store._owns_client = True
        return store

    def close(self) -> None:
        """Close the client when ``connect`` opened it; a client handed to ``__init__`` stays its owner's."""
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> WeaviateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # collections -----------------------------------------------------------------------------------
    def collection_name(self, strategy: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", strategy):
            raise StoreError(f"strategy {strategy!r} is not a valid name ([a-z][a-z0-9_]*)")
        return self.prefix + strategy.capitalize()

    def _collection(self, strategy: str) -> Any:
        return self.client.collections.use(self.collection_name(strategy))

    def exists(self, strategy: str) -> bool:
        with _store_errors("exists"):
            return bool(self.client.collections.exists(self.collection_name(strategy)))

    def ensure_collection(self, strategy: str, dimension: int, model_id: str = "") -> None:
        """Create the strategy's collection when missing; an existing one must hold vectors of ``dimension``
        (and of ``model_id``, when given and recorded), else StoreError: drop it first to change models."""
        from weaviate.classes.config import Configure, Property, VectorDistances

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
        properties = [
            Property(name=n, data_type=self._data_type(t), tokenization=self._tokenization(tok),
                     index_searchable=searchable if tok else None, index_filterable=filterable)
            for n, (t, tok, searchable, filterable) in CORE_PROPERTIES.items()
        ]
        description = json.dumps({"ragloom": "chunks", "strategy": strategy, "dimension": dimension,
                                  "model_id": model_id})
        with _store_errors(f"create collection {name}"):
            try:
                self.client.collections.create(
                    name,
                    description=description,
                    properties=properties,
                    vector_config=Configure.Vectors.self_provided(
                        vector_index_config=Configure.VectorIndex.hnsw(distance_metric=VectorDistances.COSINE)),
                    inverted_index_config=Configure.inverted_index(index_null_state=True),
                )
            except Exception:
                if self.exists(strategy):  # another process created it first: fine
                    return
                raise
        self._known_properties.pop(name, None)

    def collection_info(self, strategy: str) -> dict[str, Any] | None:
        """What ``ensure_collection`` recorded (strategy, dimension, model_id); None when there is no collection."""
        if not self.exists(strategy):
            return None
        with _store_errors("read collection config"):
            description = self._collection(strategy).config.get().description or ""
        try:
            info = json.loads(description)
        except ValueError:
            return {}
        return info if isinstance(info, dict) else {}

    def drop_collection(self, strategy: str) -> None:
        name = self.collection_name(strategy)
        with _store_errors(f"delete collection {name}"):
            self.client.collections.delete(name)
        self._known_properties.pop(name, None)

    def drop_collections(self) -> list[str]:
        """Delete every collection whose name starts with this store's prefix; returns their names."""
        with _store_errors("list collections"):
            names = [n for n in self.client.collections.list_all(simple=True) if n.startswith(self.prefix)]
        for name in names:
            with _store_errors(f"delete collection {name}"):
                self.client.collections.delete(name)
            self._known_properties.pop(name, None)
        return names

    @staticmethod
    def _data_type(name: str) -> Any:
        from weaviate.classes.config import DataType

        return getattr(DataType, name)

    @staticmethod
    def _tokenization(name: str | None) -> Any:
        from weaviate.classes.config import Tokenization

        return None if name is None else getattr(Tokenization, name)

    def property_types(self, strategy: str, refresh: bool = False) -> dict[str, str]:
        """Property -> Weaviate data type name ("TEXT", "INT", "DATE", "TEXT_ARRAY", ...) of the strategy's
        collection, cached; ``refresh`` re-reads it (ingestion adds meta_ properties as they appear)."""
        return dict(self._properties(self.collection_name(strategy), refresh=refresh))

    def _properties(self, name: str, refresh: bool = False) -> dict[str, str]:
        if refresh or name not in self._known_properties:
            with _store_errors(f"read schema of {name}"):
                config = self.client.collections.use(name).config.get()
            self._known_properties[name] = {p.name: str(p.data_type.name) for p in config.properties}
        return self._known_properties[name]

    # inventory -------------------------------------------------------------------------------------
    def chunk_index(self, strategy: str) -> dict[str, str]:
        """chunk_id -> document_id of every object (cursor API; {} when the collection does not exist)."""
        if not self.exists(strategy):
            return {}

        def read() -> dict[str, str]:
            with _store_errors(f"iterate {self.collection_name(strategy)}"):
                return {obj.properties["chunk_id"]: obj.properties.get("document_id") or ""
                        for obj in self._collection(strategy).iterator(
                            return_properties=["chunk_id", "document_id"], cache_size=ITERATOR_PAGE)}

        return _once_index_loaded(read)

    def count(self, strategy: str) -> int:
        if not self.exists(strategy):
            return 0

        def read() -> int:
            with _store_errors(f"count {self.collection_name(strategy)}"):
                return int(self._collection(strategy).aggregate.over_all(total_count=True).total_count or 0)

        return _once_index_loaded(read)

    def vector_dimension(self, strategy: str) -> int | None:
        """Length of a stored vector; None when the collection is missing or empty."""
        if not self.exists(strategy):
            return None
        with _store_errors(f"read a vector of {self.collection_name(strategy)}"):
            res = self._collection(strategy).query.fetch_objects(limit=1, include_vector=True, return_properties=[])
        if not res.objects:
            return None
        vector = _default_vector(res.objects[0].vector)
        return None if vector is None else len(vector)

    # writes ----------------------------------------------------------------------------------------
    def upsert_chunks(self, strategy: str, chunks: list[Chunk], vectors: np.ndarray) -> int:
        """Write chunks with their vectors (idempotent: uuid5 of the chunk id); StoreError naming any that
        still fail after bounded retries. Returns the number written."""
        result = self.write_chunks(strategy, chunks, vectors)
        if result.failed:
            raise StoreError(failure_message(self.collection_name(strategy), result.failed))
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
        if not self.exists(strategy):
            raise StoreError(f"collection {name} does not exist: call ensure_collection first")
        rows = [self._object_properties(c) for c in chunks]
        self._ensure_meta_properties(name, chunks, rows)
        objects = [DataObject(properties=props, uuid=generate_uuid5(c.chunk_id), vector=v.tolist())
                   for c, props, v in zip(chunks, rows, vectors, strict=True)]
        # Weaviate 1.39 stores NaN, inf and all-zero vectors without complaint and then ranks them with NaN
        # scores: refuse them here, per object, like any other failed object (no retry can fix them).
        invalid = _invalid_vectors(vectors)
        pending = [i for i in range(len(objects)) if i not in invalid]
        errors: dict[int, str] = {}
        unreachable = ""  # a whole request failed (server down, network): not the objects' fault
        collection = self.client.collections.use(name)
        for attempt in range(len(RETRY_DELAYS) + 1):
            if attempt:
                time.sleep(RETRY_DELAYS[attempt - 1])
            errors, unreachable = {}, ""
            for begin in range(0, len(pending), INSERT_BATCH):
                part = pending[begin:begin + INSERT_BATCH]
                try:
                    errors.update(self._insert(collection, [objects[i] for i in part], part))
                except _RequestFailed as e:
                    unreachable = str(e)
                    errors.update(dict.fromkeys(part, unreachable))
            pending = sorted(errors)
            if not pending:
                break
        if unreachable:
            # An outage fails the run now, loudly, instead of recording every later batch as failed objects.
            raise StoreError(f"Weaviate: writing to {name} failed after {len(RETRY_DELAYS) + 1} attempts: "
                             f"{unreachable}")
        failed = {chunks[i].chunk_id: msg for i, msg in sorted({**invalid, **errors}.items())}
        return WriteResult(written=len(chunks) - len(failed), failed=failed)

    @staticmethod
    def _insert(collection: Any, objects: list[Any], indexes: list[int]) -> dict[int, str]:
        """One insert_many; returns original index -> error message for the objects that failed."""
        from weaviate.exceptions import WeaviateInsertManyAllFailedError

        try:
            result = collection.data.insert_many(objects)
        except WeaviateInsertManyAllFailedError as e:
            if len(objects) == 1:
                return {indexes[0]: str(e).removeprefix("Every object failed during insertion. ")}
            # The exception does not say which error is whose: one request per object tells us exactly.
            errors: dict[int, str] = {}
            for obj, index in zip(objects, indexes, strict=True):
                errors.update(WeaviateStore._insert(collection, [obj], [index]))
            return errors
        except Exception as e:
            if _is_weaviate_error(e) or type(e).__module__.startswith(("grpc", "weaviate")):
                raise _RequestFailed(f"{type(e).__name__}: {e}") from e  # the whole request failed: retry all
            raise
        return {indexes[i]: err.message for i, err in result.errors.items()}

    def _object_properties(self, chunk: Chunk) -> dict[str, Any]:
        scope = chunk.scope
        props: dict[str, Any] = {
            "chunk_id": chunk.chunk_id,
            "document_id": chunk.document_id,
            "strategy": chunk.strategy,
            "level": int(chunk.level),
            "position": int(chunk.position),
            "start": int(chunk.start),
            "end": int(chunk.end),
            "token_count": int(chunk.token_count),
            "heading_path": HEADING_SEPARATOR.join(chunk.heading_path),
            "heading_parts": list(chunk.heading_path),
            "title": str(chunk.metadata.get("title") or ""),
            "source_path": str(chunk.metadata.get("source_path") or ""),
            "scope_path": scope.path,
            "scope_tenant": scope.tenant,
            "scope_user": scope.user,
            "scope_chat": scope.chat,
            "scope_agent": scope.agent,
            "text": chunk.text,
            "embed_text": chunk.embed_text,
        }
        if chunk.parent_id:
            props["parent_id"] = chunk.parent_id
        for key, value in flatten_metadata(chunk.metadata).items():
            if infer_type(value) is not None:
                props[key] = value
        return props

    def _ensure_meta_properties(self, name: str, chunks: list[Chunk], rows: list[dict[str, Any]]) -> None:
        """Add missing meta_ properties with their inferred types, then coerce every value (in place)."""
        from weaviate.classes.config import Property

        known = self._properties(name)
        seen: dict[str, set[str]] = {}
        for row in rows:
            for key, value in row.items():
                if key.startswith(META_PREFIX) and key not in known:
                    seen.setdefault(key, set()).add(infer_type(value) or "TEXT")
        if seen:
            for key, types in sorted(seen.items()):
                data_type = widen(types)
                prop = Property(name=key, data_type=self._data_type(data_type), index_filterable=True,
                                index_searchable=False if "TEXT" in data_type else None,
                                tokenization=self._tokenization("FIELD") if "TEXT" in data_type else None)
                with _store_errors(f"add property {key} to {name}"):
                    try:
                        self.client.collections.use(name).config.add_property(prop)
                    except Exception:
                        # a concurrent writer may have added it: re-read the schema before giving up
                        if key not in self._properties(name, refresh=True):
                            raise
            known = self._properties(name, refresh=True)
        for chunk, row in zip(chunks, rows, strict=True):
            for key, value in row.items():
                if not key.startswith(META_PREFIX):
                    continue
                data_type = known.get(key, "TEXT")
                try:
                    row[key] = coerce(value, data_type)
                except ValueError as e:
                    raise StoreError(f"chunk {chunk.chunk_id} of document {chunk.document_id}: metadata "
                                     f"{key.removeprefix(META_PREFIX)!r} -> {key}: {e} (the property is "
                                     f"{data_type} since its first value)") from e

    def delete_chunks(self, strategy: str, chunk_ids: Iterable[str]) -> int:
        """Delete objects by chunk id (batched by uuid); returns how many were deleted."""
        from weaviate.classes.query import Filter
        from weaviate.util import generate_uuid5

        ids = list(dict.fromkeys(chunk_ids))
        if not ids or not self.exists(strategy):
            return 0
        collection = self._collection(strategy)
        deleted = 0
        for begin in range(0, len(ids), DELETE_BATCH):
            uuids = [generate_uuid5(cid) for cid in ids[begin:begin + DELETE_BATCH]]
            with _store_errors(f"delete from {self.collection_name(strategy)}"):
                result = collection.data.delete_many(where=Filter.by_id().contains_any(uuids))
            if result.failed:
                raise StoreError(f"Weaviate could not delete {result.failed} of {len(uuids)} objects from "
                                 f"{self.collection_name(strategy)}")
            deleted += int(result.successful)
        return deleted

    # reads -----------------------------------------------------------------------------------------
    def near_vector(self, strategy: str, vector: Sequence[float] | np.ndarray, k: int, where: Any = None,
                    include_vectors: bool = False) -> list[RetrievedItem]:
        """Nearest chunks by cosine; lane_scores {"dense": cosine similarity}."""
        from weaviate.classes.query import MetadataQuery

        with self._query_errors(strategy, "near_vector"):
            res = self._collection(strategy).query.near_vector(
                near_vector=_as_list(vector), limit=k, filters=where, include_vector=include_vectors,
                return_metadata=MetadataQuery(distance=True), return_properties=RETURN_PROPERTIES)
        items = []
        for obj in res.objects:
            similarity = 1.0 - float(obj.metadata.distance if obj.metadata.distance is not None else 1.0)
            items.append(self._item(obj, similarity, {"dense": similarity}, include_vectors))
        return _ranked(items)

    def bm25(self, strategy: str, query: str, k: int, where: Any = None,
             include_vectors: bool = False) -> list[RetrievedItem]:
        """BM25 over text and heading path; lane_scores {"bm25": score}."""
        from weaviate.classes.query import MetadataQuery

        if not query.strip():
            return []
        with self._query_errors(strategy, "bm25"):
            res = self._collection(strategy).query.bm25(
                query=query, query_properties=BM25_PROPERTIES, limit=k, filters=where,
                include_vector=include_vectors, return_metadata=MetadataQuery(score=True),
                return_properties=RETURN_PROPERTIES)
        items = [self._item(o, float(o.metadata.score or 0.0), {"bm25": float(o.metadata.score or 0.0)},
                            include_vectors) for o in res.objects]
        return _ranked(items)

    def hybrid(self, strategy: str, query: str, vector: Sequence[float] | np.ndarray, k: int, alpha: float = 0.5,
               fusion: str = "relative_score", where: Any = None,
               include_vectors: bool = False) -> list[RetrievedItem]:
        """Weaviate's native hybrid (BM25 on text + heading path, and the given vector); lane_scores {"hybrid"}."""
        from weaviate.classes.query import HybridFusion, MetadataQuery

        fusions = {"relative_score": HybridFusion.RELATIVE_SCORE, "ranked": HybridFusion.RANKED}
        if fusion not in fusions:
            raise StoreError(f"hybrid fusion {fusion!r}: choose relative_score or ranked")
        if not 0.0 <= alpha <= 1.0:
            raise StoreError(f"hybrid alpha must be within [0, 1], got {alpha}")
        with self._query_errors(strategy, "hybrid"):
            res = self._collection(strategy).query.hybrid(
                query=query, vector=_as_list(vector), alpha=alpha, fusion_type=fusions[fusion],
                query_properties=BM25_PROPERTIES, limit=k, filters=where, include_vector=include_vectors,
                return_metadata=MetadataQuery(score=True), return_properties=RETURN_PROPERTIES)
        items = [self._item(o, float(o.metadata.score or 0.0), {"hybrid": float(o.metadata.score or 0.0)},
                            include_vectors) for o in res.objects]
        return _ranked(items)

    def fetch(self, strategy: str, chunk_ids: Sequence[str], where: Any = None,
              include_vectors: bool = False) -> list[RetrievedItem]:
        """The chunks with these ids (that also match ``where``), in the order asked; missing ids are skipped."""
        from weaviate.classes.query import Filter
        from weaviate.util import generate_uuid5

        ids = list(dict.fromkeys(chunk_ids))
        if not ids:
            return []
        collection = self._collection(strategy)
        found: dict[str, RetrievedItem] = {}
        for begin in range(0, len(ids), FETCH_BATCH):
            part = ids[begin:begin + FETCH_BATCH]
            flt = Filter.by_id().contains_any([generate_uuid5(c) for c in part])
            with self._query_errors(strategy, "fetch"):
                res = collection.query.fetch_objects(filters=flt if where is None else flt & where, limit=len(part),
                                                     include_vector=include_vectors,
                                                     return_properties=RETURN_PROPERTIES)
            for obj in res.objects:
                item = self._item(obj, 0.0, {}, include_vectors)
                found[item.chunk_id] = item
        return _ranked([found[c] for c in ids if c in found])

    @contextmanager
    def _query_errors(self, strategy: str, what: str) -> Iterator[None]:
        """Like _store_errors, and says so when the cause is a missing collection (checked only on failure,
        so a query costs one round trip)."""
        name = self.collection_name(strategy)
        try:
            yield
        except StoreError:
            raise
        except Exception as e:
            if not (_is_weaviate_error(e) or type(e).__module__.startswith(("grpc", "weaviate"))):
                raise
            if not self.exists(strategy):
                raise StoreError(f"collection {name} does not exist: index the {strategy!r} chunks first") from e
            raise StoreError(f"Weaviate {what} on {name} failed: {e}") from e

    @staticmethod
    def _item(obj: Any, score: float, lanes: dict[str, float], include_vectors: bool) -> RetrievedItem:
        props = dict(obj.properties)
        parts = props.pop("heading_parts", None)
        heading = props.pop("heading_path", "") or ""
        metadata: dict[str, Any] = {
            k: (v.isoformat() if isinstance(v, datetime) else v)
            for k, v in props.items() if k not in ("chunk_id", "document_id", "text", "embed_text")
        }
        metadata.setdefault("parent_id", None)
        if include_vectors:
            vector = _default_vector(obj.vector)
            metadata["vector"] = [float(x) for x in vector] if vector is not None else None
        return RetrievedItem(
            chunk_id=props.get("chunk_id", ""),
            document_id=props.get("document_id", ""),
            text=props.get("text", ""),
            score=score,
            heading_path=list(parts) if parts else ([p for p in heading.split(HEADING_SEPARATOR)] if heading else []),
            lane_scores=lanes,
            metadata=metadata,
        )


def failure_message(collection: str, failed: Mapping[str, str], show: int = 5) -> str:
    """'N objects failed ...: id: error; ...' with the first few ids and messages."""
    sample = "; ".join(f"{cid}: {msg}" for cid, msg in list(failed.items())[:show])
    more = f" (and {len(failed) - show} more)" if len(failed) > show else ""
    return f"{len(failed)} object(s) could not be written to {collection} after retries: {sample}{more}"


def _invalid_vectors(vectors: np.ndarray) -> dict[int, str]:
    """Row index -> why, for vectors a cosine index cannot hold (non-finite, or zero length)."""
    out: dict[int, str] = {}
    finite = np.isfinite(vectors).all(axis=1)
    norms = np.linalg.norm(np.where(np.isfinite(vectors), vectors, 0.0), axis=1)
    for i in np.flatnonzero(~finite):
        out[int(i)] = "vector has NaN or infinite components"
    for i in np.flatnonzero(finite & (norms < 1e-12)):
        out[int(i)] = "vector is all zeros (cosine distance is undefined)"
    return out


def _default_vector(vector: Any) -> list[float] | None:
    if vector is None:
        return None
    if isinstance(vector, Mapping):
        return vector.get("default") or next(iter(vector.values()), None)
    return list(vector)


def _as_list(vector: Sequence[float] | np.ndarray) -> list[float]:
    return np.asarray(vector, dtype=np.float32).reshape(-1).tolist()


def _ranked(items: list[RetrievedItem]) -> list[RetrievedItem]:
    for rank, item in enumerate(items, start=1):
        item.rank = rank
    return items
