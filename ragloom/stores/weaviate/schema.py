"""What a chunk looks like in Weaviate: the core properties, and user metadata flattened, typed and coerced.
All pure (the ``weaviate`` imports only build configuration objects).

Schema. Each chunking strategy gets ``<prefix><Strategy>`` (e.g. ``RagloomRecursive``), HNSW with cosine
distance, no vectorizer. Ids, paths and scope fields use FIELD tokenization (exact filters); ``text`` and
``heading_path`` (" > "-joined) use WORD tokenization; ``bm25_text`` (words and stems: ragloom.stores.analysis)
carries BM25; ``embed_text`` is stored only.
Object UUIDs are uuid5 of the chunk id, so writing a chunk twice overwrites it. The collection's
description records the model id and dimension of its vectors, so a model change is detectable.

User metadata. ``chunk.metadata`` is flattened into properties named ``meta_<key>`` (nested dicts joined
with ``_``; keys lower-cased, anything outside ``[a-z0-9_]`` becomes ``_``, so ``"Review Status"`` and
``"review-status"`` both land in ``meta_review_status``: ``ragloom.filters.meta_property_name``, shared with
the filter language). ``title`` and ``source_path`` are not user metadata: they fill the core properties of
the same name. Types are inferred from the values and the properties are added to the schema before the
write (never left to auto-schema):

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

import math
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

from ragloom.filters import meta_property_name, parse_iso_date
from ragloom.stores.analysis import analyze, bm25_source
from ragloom.types import HEADING_SEPARATOR, Chunk

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
    # title + heading path + text as words and marked stems, no stopwords (ragloom.stores.analysis): what the
    # BM25 lane searches
    "bm25_text": ("TEXT", "WHITESPACE", True, False),
}
RESERVED_METADATA = ("title", "source_path")  # chunk.metadata keys that fill core properties


# configuration objects -------------------------------------------------------------------------------------


def data_type(name: str) -> Any:
    """``weaviate.classes.config.DataType`` by name ("TEXT", "INT_ARRAY", ...)."""
    from weaviate.classes.config import DataType

    return getattr(DataType, name)


def tokenization(name: str | None) -> Any:
    from weaviate.classes.config import Tokenization

    return None if name is None else getattr(Tokenization, name)


def core_properties() -> list[Any]:
    """The ``Property`` list every chunk collection is created with."""
    from weaviate.classes.config import Property

    return [Property(name=n, data_type=data_type(t), tokenization=tokenization(tok),
                     index_searchable=searchable if tok else None, index_filterable=filterable)
            for n, (t, tok, searchable, filterable) in CORE_PROPERTIES.items()]


def meta_property(name: str, type_name: str) -> Any:
    """The ``Property`` for a user metadata key: filterable; text exact (FIELD) and not searched by BM25."""
    from weaviate.classes.config import Property

    text = "TEXT" in type_name
    return Property(name=name, data_type=data_type(type_name), index_filterable=True,
                    index_searchable=False if text else None, tokenization=tokenization("FIELD") if text else None)


# metadata values -------------------------------------------------------------------------------------------


def as_date(value: Any) -> datetime | None:
    """A datetime, date or ISO date string as an aware datetime (naive means UTC); None for anything else."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    return parse_iso_date(value) if isinstance(value, str) else None


def _scalar_type(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "BOOL"
    if isinstance(value, int):
        return "INT"
    if isinstance(value, float):
        return None if not math.isfinite(value) else "NUMBER"
    if as_date(value) is not None:
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


def coerce(value: Any, type_name: str) -> Any:
    """``value`` stored losslessly as ``type_name``; raises ValueError when it cannot be."""
    if type_name.endswith("_ARRAY"):
        items = value if isinstance(value, list | tuple | set | frozenset) else [value]
        scalar = type_name.removesuffix("_ARRAY")
        return [coerce(v, scalar) for v in items if _scalar_type(v) is not None]
    if type_name == "TEXT":
        return value if isinstance(value, str) else str(value)
    if type_name == "BOOL" and isinstance(value, bool):
        return value
    if type_name == "NUMBER" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if type_name == "INT" and not isinstance(value, bool):
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return int(value)
    if type_name == "DATE":
        parsed = as_date(value)
        if parsed is not None:
            return parsed
    raise ValueError(f"{value!r} ({type(value).__name__}) cannot be stored in a {type_name} property")


def object_properties(chunk: Chunk) -> dict[str, Any]:
    """The properties of a chunk's object: the core ones, and its user metadata flattened (values as given;
    ``coerce`` them to the collection's types before writing)."""
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
        "bm25_text": analyze(bm25_source(str(chunk.metadata.get("title") or ""), chunk.heading_path, chunk.text)),
    }
    if chunk.parent_id:
        props["parent_id"] = chunk.parent_id
    for key, value in flatten_metadata(chunk.metadata).items():
        if infer_type(value) is not None:
            props[key] = value
    return props

