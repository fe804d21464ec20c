"""What a chunk looks like in Weaviate: the core properties, and user metadata flattened, typed and coerced.
All pure (the ``weaviate`` imports only build configuration objects).

Schema. Each chunking strategy gets ``<prefix><Strategy>`` (e.g. ``RagloomRecursive``), HNSW with cosine
distance, no vectorizer. Ids, paths and scope fields use FIELD tokenization (exact filters); ``heading_path``
(" > "-joined) uses WORD tokenization (a case-insensitive filter); ``bm25_text`` (words and stems:
ragloom.stores.analysis) carries BM25; ``text`` is stored only. ``embed_text`` is not stored: the sync embeds
from the chunks table, no read uses it, and a query's hybrid search has Weaviate decode 100 stored objects per lane
(docs/experiments/2026-11-28-weaviate-object-size.md).
Object UUIDs are uuid5 of the chunk id, so writing a chunk twice overwrites it. The collection's
description records the model id and dimension of its vectors, so a model change is detectable.

User metadata. ``chunk.metadata`` becomes properties named ``meta_<key>`` as ``ragloom.metadata.MetadataLayout``
stores it: declared keys with the operator's types, every other key as TEXT_ARRAY, so no value ever decides a
property's type (docs/design/metadata.md). ``title`` and ``source_path`` are not user metadata: they fill the
core properties of the same name. A metadata property is added before the first write that carries its key,
with the layout's type for that key (never from the value, never left to auto-schema): the chunks of a
collection without metadata carry no empty properties, which reads would return for every hit. Text metadata uses
FIELD tokenization (exact match; ``Like`` for patterns) and is not searched by BM25.
"""

from __future__ import annotations

from typing import Any

from ragloom.metadata import RESERVED, MetadataLayout
from ragloom.stores.analysis import analyze, bm25_source
from ragloom.types import HEADING_SEPARATOR, Chunk

# name -> (data type name, tokenization or None, searchable, filterable). Only what a query filters on
# (ragloom.filters: the user's core fields, scope, ids, level) or BM25 searches (bm25_text) is indexed: each
# index costs the server CPU on every write, and the ones nothing read took 14-23% of it
# (docs/experiments/2026-11-26-weaviate-lean-schema.md). Collections created before keep their indexes.
CORE_PROPERTIES: dict[str, tuple[str, str | None, bool, bool]] = {
    "chunk_id": ("TEXT", "FIELD", False, True),
    "document_id": ("TEXT", "FIELD", False, True),
    "strategy": ("TEXT", "FIELD", False, True),
    "parent_id": ("TEXT", "FIELD", False, True),
    "level": ("INT", None, False, True),
    "position": ("INT", None, False, False),
    "start": ("INT", None, False, False),
    "end": ("INT", None, False, False),
    "token_count": ("INT", None, False, False),
    "heading_path": ("TEXT", "WORD", False, True),  # filtered (case-insensitive Like), not searched
    "heading_parts": ("TEXT_ARRAY", "FIELD", False, False),  # exact round trip of the path's pieces
    "title": ("TEXT", "FIELD", False, True),
    "source_path": ("TEXT", "FIELD", False, True),
    "scope_path": ("TEXT", "FIELD", False, True),
    "scope_tenant": ("TEXT", "FIELD", False, True),
    "scope_user": ("TEXT", "FIELD", False, True),
    "scope_chat": ("TEXT", "FIELD", False, True),
    "scope_agent": ("TEXT", "FIELD", False, True),
    "text": ("TEXT", "WORD", False, False),  # stored; BM25 searches bm25_text
    # title + heading path + text as words and marked stems, no stopwords (ragloom.stores.analysis): what the
    # BM25 lane searches
    "bm25_text": ("TEXT", "WHITESPACE", True, False),
}
RESERVED_METADATA = RESERVED  # chunk.metadata keys that fill core properties


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


def object_properties(chunk: Chunk, layout: MetadataLayout) -> dict[str, Any]:
    """The properties of a chunk's object: the core ones, and its metadata as ``layout`` stores it
    (MetadataError when the chunk's metadata breaks a cap or a declared type)."""
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
        "bm25_text": analyze(bm25_source(str(chunk.metadata.get("title") or ""), chunk.heading_path, chunk.text)),
    }
    if chunk.parent_id:
        props["parent_id"] = chunk.parent_id
    props.update(layout.prepare(chunk.metadata))
    return props

