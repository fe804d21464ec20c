"""The query service in-process over the real stores, for the security and isolation suites.

A layout of scopes (tenants, users, chats, agents and __shared__), one document per scope naming a canary string
no other scope holds, written to Weaviate and Neo4j under a namespace of its own; keys of every kind of principal
in a keys file; ``create_app`` over a ``Ragloom`` with the fast hash embedder and a rule-based spaCy pipeline, no
reranker and no model, driven by Starlette's TestClient (the real ASGI stack, no socket).
"""

from __future__ import annotations

import dataclasses
import random
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from reliability_support import STRATEGY, HashEmbedder, people_nlp

from ragloom.api import Ragloom
from ragloom.extraction import EntityExtractor
from ragloom.indexing.graph import sync_graph
from ragloom.indexing.vectors import sync_vectors
from ragloom.service.keys import KeyStore
from ragloom.settings import Settings
from ragloom.types import Chunk, Scope, make_chunk_id

COMPANY = "Globex Corporation"
TOPIC = "Helios budget review"


@dataclass
class Key:
    name: str
    key: str
    tenant: str
    user: str
    admin: bool
    revoked: bool = False

    @property
    def scope(self) -> Scope:
        return Scope(self.tenant, self.user)


@dataclass
class Layout:
    scopes: list[Scope]
    canary: dict[str, str] = field(default_factory=dict)  # scope path -> the string only its document holds
    documents: dict[str, str] = field(default_factory=dict)  # document id -> scope path
    chunks: list[Chunk] = field(default_factory=list)


def make_layout(seed: int) -> Layout:
    rng = random.Random(seed)
    scopes = [Scope()]
    for t in range(2):
        tenant = f"t{t}x{rng.randrange(1000)}"
        scopes.append(Scope(tenant))
        for u in range(2):
            scopes.append(Scope(tenant, f"u{u}"))
            scopes.append(Scope(tenant, f"u{u}", "c0"))
            scopes.append(Scope(tenant, f"u{u}", "c0", "a0"))
    layout = Layout(scopes)
    for scope in scopes:
        canary = f"CANARY{rng.randrange(16**10):010x}"
        layout.canary[scope.path] = canary
        doc = f"docs/{scope.path.replace('/', '-')}-{canary.lower()}.md"
        text = (f"{canary} leads the {TOPIC} at {COMPANY}. {canary} met {COMPANY} about the {TOPIC} "
                "and the quarterly numbers.")
        layout.chunks.append(Chunk(chunk_id=make_chunk_id(doc, STRATEGY, "whole", 0, len(text), text), document_id=doc,
                                   strategy=STRATEGY, text=text, start=0, end=len(text),
                                   token_count=len(text.split()), position=0, scope=scope,
                                   metadata={"title": f"Notes of {canary}", "source_path": doc}))
        layout.documents[doc] = scope.path
    return layout


def layout_nlp(layout: Layout):
    return people_nlp(layout.canary.values(), COMPANY)


def make_keys(store: KeyStore, layout: Layout) -> list[Key]:
    """Per tenant: an application key, an admin key, two user keys and a revoked user key; and a user-level admin
    key where the key store still accepts one (before #28 it did: the suites then show what it could do)."""
    from ragloom.errors import ConfigError

    keys: list[Key] = []
    for tenant in sorted({s.tenant for s in layout.scopes if s.tenant}):
        for name, user, admin in (("app", "", False), ("admin", "", True), ("u0", "u0", False), ("u1", "u1", False)):
            keys.append(Key(f"{tenant}:{name}", store.create(tenant, user, admin=admin)[0], tenant, user, admin))
        key, record = store.create(tenant, "u0")
        store.revoke(record.key_id)
        keys.append(Key(f"{tenant}:revoked", key, tenant, "u0", False, revoked=True))
        try:
            keys.append(Key(f"{tenant}:u1-admin", store.create(tenant, "u1", admin=True)[0], tenant, "u1", True))
        except ConfigError:
            pass
    return keys


@dataclass
class Harness:
    client: object  # starlette.testclient.TestClient
    settings: Settings
    layout: Layout
    keys: list[Key]
    rag: Ragloom
    root: Path

    def key(self, name: str) -> Key:
        return next(k for k in self.keys if k.name.endswith(name))

    def tenant_key(self, tenant_index: int, name: str) -> Key:
        tenants = sorted({k.tenant for k in self.keys})
        return next(k for k in self.keys if k.name == f"{tenants[tenant_index]}:{name}")


def service_settings(settings: Settings, root: Path, prefix: str, graph_namespace: str, **overrides) -> Settings:
    # settings an older checkout lacks are left out, so the suites also run against the commits before a fix
    known = {f.name for f in dataclasses.fields(Settings)}
    overrides = {k: v for k, v in overrides.items() if k in known}
    return dataclasses.replace(
        settings, collection_prefix=prefix, graph_namespace=graph_namespace, chunkings=(STRATEGY,),
        graph_chunkings=(STRATEGY,), rerank_model="none", uploads_dir=root / "uploads",
        artifacts_path=root / "artifacts", service_keys_file=root / "keys.json", service_rate_per_minute=100_000,
        llm_base_url="", **overrides)


@contextmanager
def running_service(settings: Settings, vectors, graph, root: Path, seed: int = 5, **overrides) -> Iterator[Harness]:
    """The layout written to ``vectors`` and ``graph``, and the service over them (closed on exit)."""
    from fastapi.testclient import TestClient

    from ragloom.service.app import create_app

    layout = make_layout(seed)
    nlp = layout_nlp(layout)
    sync_vectors(vectors, HashEmbedder(), STRATEGY, layout.chunks)
    sync_graph(graph, EntityExtractor(nlp), STRATEGY, layout.chunks)
    ours = service_settings(settings, root, vectors.prefix, graph.namespace, **overrides)
    keys = make_keys(KeyStore(ours.resolved_keys_file), layout)
    rag = Ragloom(ours, vectors=vectors, graph=graph, embedder=HashEmbedder(), nlp=nlp, llm=None, hide_schema=True)
    app = create_app(ours, rag=rag)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Harness(client, ours, layout, keys, rag, root)
    rag.close()


def fresh_tag() -> str:
    return secrets.token_hex(4)
