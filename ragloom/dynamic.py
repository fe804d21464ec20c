"""Dynamic items: text an application injects at run time (a tool result, a note) into a chat or agent scope.

An item is one chunk per chunking collection (hierarchical excepted: it has no levels to sit in), embedded and
written at once, with metadata ``dynamic: true``, ``injected_at`` and, with a TTL, ``expires_at`` (a DATE).
Queries never return an expired item, swept or not (``visibility_nodes``); ``sweep_expired`` deletes them
(the query service owns it: it runs it every RAGLOOM_SERVICE_SWEEP_SECONDS). Its document id is its item id, so
``delete_item`` removes it from every collection.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from ragloom.errors import ConfigError
from ragloom.filters import MATCHES_NOTHING, Condition, Node, Not, combine, meta_property_name
from ragloom.metadata import MetadataLayout, flatten
from ragloom.types import Chunk, Scope, make_chunk_id

DYNAMIC = "dynamic"
EXPIRES_AT = "expires_at"
INJECTED_AT = "injected_at"
NAMESPACE = "namespace"
# the tool whose result an item is (an agent's memory, ragloom.profiles); metadata may also carry it, as
# injections did before tools were first class, and then it must agree with the one given
TOOL = "tool"
AGENT = "agent_id"  # the agent (its profile, else the scope's agent) that remembered it
RESERVED_KEYS = (DYNAMIC, EXPIRES_AT, INJECTED_AT, NAMESPACE, AGENT, "title", "source_path")
MAX_TEXT_CHARS = 8000  # one chunk: the embedding model reads ~256 tokens of it, the rest is returned as text
MAX_TTL_SECONDS = 366 * 24 * 3600
ITEM_PREFIX = "dyn-"


def is_injected(document_id: str) -> bool:
    """Whether a document id is an injected item's (ingested documents' ids start with their source name)."""
    return document_id.startswith(ITEM_PREFIX)


def item_strategies(strategies: Iterable[str]) -> list[str]:
    """The chunking collections an injected item goes to."""
    return [s for s in strategies if s != "hierarchical"]


@dataclass
class InjectedItem:
    item_id: str
    scope: Scope
    strategies: list[str]
    chunk_ids: dict[str, str] = field(default_factory=dict)
    injected_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    expires_at: datetime | None = None


def build_chunks(text: str, scope: Scope, strategies: Sequence[str], *, metadata: Mapping[str, Any] | None = None,
                 ttl_seconds: float | None = None, namespace: str = "", title: str = "", tool: str = "",
                 agent_id: str = "", now: datetime | None = None, layout: MetadataLayout | None = None
                 ) -> tuple[InjectedItem, list[Chunk]]:
    """The item and its chunks (one per strategy); validates everything before anything is written (metadata
    against ``layout``, the store's: a MetadataError names the caller's key and value)."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("inject: text must be a non-empty string")
    if len(text) > MAX_TEXT_CHARS:
        raise ConfigError(f"inject: text has {len(text)} characters, over the limit of {MAX_TEXT_CHARS}")
    if not scope.tenant:
        raise ConfigError("inject: an item needs an owner scope (tenant at least)")
    metadata = dict(metadata or {})
    # checked on the names the store writes: nested mappings flatten to meta_<outer>_<inner>, so
    # {"_": {"namespace": ...}} would otherwise land on meta_namespace
    reserved = {meta_property_name(r) for r in RESERVED_KEYS}
    clash = sorted({k for k in metadata if k in RESERVED_KEYS} |
                   {k for k in flatten(metadata) if meta_property_name(k) in reserved})
    if clash:
        raise ConfigError(f"inject: metadata keys {clash} are reserved ({', '.join(RESERVED_KEYS)})")
    if tool and metadata.get(TOOL, tool) != tool:
        raise ConfigError(f"inject: metadata tool {metadata[TOOL]!r:.80} differs from the tool {tool!r:.80}")
    if ttl_seconds is not None and not 0 < ttl_seconds <= MAX_TTL_SECONDS:
        raise ConfigError(f"inject: ttl_seconds must be within (0, {MAX_TTL_SECONDS}], got {ttl_seconds}")
    now = now or datetime.now(UTC)
    item = InjectedItem(item_id=ITEM_PREFIX + uuid.uuid4().hex[:24], scope=scope, strategies=list(strategies),
                        injected_at=now,
                        expires_at=now + timedelta(seconds=ttl_seconds) if ttl_seconds is not None else None)
    meta: dict[str, Any] = {**metadata, DYNAMIC: True, INJECTED_AT: now, "title": title or "injected item"}
    if item.expires_at is not None:
        meta[EXPIRES_AT] = item.expires_at
    if namespace:
        meta[NAMESPACE] = namespace
    if tool:
        meta[TOOL] = tool
    if agent_id:
        meta[AGENT] = agent_id
    (layout or MetadataLayout()).prepare(meta)  # checked now, so a refused item writes nothing anywhere
    chunks = []
    for strategy in strategies:
        chunk_id = make_chunk_id(item.item_id, strategy, "dynamic", 0, len(text), text)
        item.chunk_ids[strategy] = chunk_id
        chunks.append(Chunk(chunk_id=chunk_id, document_id=item.item_id, strategy=strategy, text=text, start=0,
                            end=len(text), token_count=len(text.split()), position=0,
                            heading_path=[title] if title else [], metadata=dict(meta), scope=scope))
    return item, chunks


def inject(store: Any, embedder: Any, strategies: Sequence[str], text: str, scope: Scope,
           **options: Any) -> InjectedItem:
    """Embed once and write the item into every strategy's collection (created when missing)."""
    item, chunks = build_chunks(text, scope, strategies, layout=store.metadata, **options)
    vector = np.asarray(embedder.encode([text]), dtype=np.float32)
    for chunk in chunks:
        store.ensure_collection(chunk.strategy, embedder.dimension, model_id=embedder.model_id)
        store.upsert_chunks(chunk.strategy, [chunk], vector)
    return item


def has_property(property_types: Mapping[str, str] | None, key: str) -> bool:
    """Whether a collection (its property types) holds metadata ``key`` on any chunk yet."""
    return property_types is not None and meta_property_name(key) in property_types


def visibility_nodes(property_types: Mapping[str, str] | None, *, exclude_dynamic: bool = False,
                     namespaces: Sequence[str] | None = None, exclude_tools: Sequence[str] = (),
                     now: datetime | None = None) -> tuple[Node, ...]:
    """The filter nodes a query adds: expired items never, dynamic ones only when asked, no results of the
    ``exclude_tools``, only the chosen
    namespaces (None: all). A condition on metadata no chunk of the collection has yet is left out (it would
    hold for every chunk anyway), except ``namespaces``, which then matches nothing. An empty ``namespaces``
    never gets here: it means no retrieval at all (``Query.skips_retrieval``)."""
    out: list[Node] = []
    if has_property(property_types, EXPIRES_AT):
        out.append(Not(Condition(EXPIRES_AT, meta_property_name(EXPIRES_AT), "lt", now or datetime.now(UTC))))
    if exclude_dynamic and has_property(property_types, DYNAMIC):
        out.append(Not(Condition(DYNAMIC, meta_property_name(DYNAMIC), "eq", True)))
    if exclude_tools and not exclude_dynamic and has_property(property_types, TOOL):
        out.append(Not(Condition(TOOL, meta_property_name(TOOL), "in", [str(t) for t in exclude_tools])))
    if namespaces is not None:
        out.append(Condition(NAMESPACE, meta_property_name(NAMESPACE), "in", [str(n) for n in namespaces])
                   if has_property(property_types, NAMESPACE) else MATCHES_NOTHING)
    return tuple(out)


def sweep_expired(store: Any, strategies: Iterable[str], now: datetime | None = None) -> int:
    """Delete expired dynamic items from every strategy's collection; returns how many chunks went."""
    now = now or datetime.now(UTC)
    removed = 0
    for strategy in strategies:
        if not store.exists(strategy) or not has_property(store.property_types(strategy), EXPIRES_AT):
            continue
        where = combine(Condition(DYNAMIC, meta_property_name(DYNAMIC), "eq", True),
                        Condition(EXPIRES_AT, meta_property_name(EXPIRES_AT), "lt", now))
        removed += store.delete_where(strategy, where)
    return removed


def owner_conditions(owner: Scope) -> list[Condition]:
    """Objects whose scope lies at or below ``owner`` (its subtree: chats and agents of a user, ...)."""
    conds = [Condition("scope", "scope_tenant", "eq", owner.tenant)]
    for level in ("user", "chat", "agent"):
        value = getattr(owner, level)
        if value:
            conds.append(Condition("scope", f"scope_{level}", "eq", value))
    return conds


def delete_item(store: Any, strategies: Iterable[str], item_id: str, owner: Scope) -> int:
    """Delete an injected item, only when it lies within ``owner``'s subtree; returns chunks deleted."""
    if not is_injected(item_id):
        return 0
    where = combine(Condition("document_id", "document_id", "eq", item_id),
                    Condition(DYNAMIC, meta_property_name(DYNAMIC), "eq", True), *owner_conditions(owner))
    return sum(store.delete_where(s, where) for s in strategies
               if store.exists(s) and has_property(store.property_types(s), DYNAMIC))
