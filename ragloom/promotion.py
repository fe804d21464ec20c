"""Promotion: moving a document up to its tenant or to __shared__, in both stores, without re-embedding (only the
scope properties change).

Who may move what (docs/security.md): a promotion reads source documents only inside the owner's subtree (an
admin key's tenant). To the tenant: from any scope below it (the tenant already reads its users' scopes). To
__shared__, which every tenant reads: only a document already at the owner's own scope, so a user's private
document crosses one boundary per deliberate act, never two in one request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragloom.dynamic import owner_conditions
from ragloom.errors import ConflictError, NotFoundError, StoreError
from ragloom.filters import Condition, combine
from ragloom.types import Scope


@dataclass(frozen=True)
class Promotion:
    document_id: str
    from_scopes: list[str]
    to_scope: str
    weaviate_objects: int
    neo4j_chunks: int


def promotable(sources: set[str], owner: Scope, target: Scope) -> set[str]:
    """The scopes a promotion by ``owner`` may move to ``target``: strictly below the target, inside the owner's
    subtree; to __shared__ only from the owner's own scope."""
    out = set()
    for path in sources:
        scope = Scope.from_path(path)
        if path == target.path or owner.path not in scope.visible_paths():
            continue
        if not target.tenant and path != owner.path:
            continue
        if target.path in scope.visible_paths():
            out.add(path)
    return out


def promote(vectors: Any, graph: Any, strategies: Sequence[str], document_id: str, owner: Scope,
            target: Scope) -> Promotion:
    """Move ``document_id`` from the scopes ``owner`` may promote to ``target`` (graph first: a re-run finishes
    a promotion that failed half-way)."""
    owned = [Condition("document_id", "document_id", "eq", document_id), *owner_conditions(owner)]
    found: set[str] = set()
    for strategy in strategies:
        found |= vectors.scope_paths_where(strategy, combine(*owned))
    sources = promotable(found, owner, target)
    if not sources:
        if found and not target.tenant:
            raise ConflictError(f"document {document_id!r} is not at the tenant scope {owner.path!r}: promote it to "
                                "the tenant first (only the tenant's own documents go to __shared__)")
        raise NotFoundError(f"no document {document_id!r} below {target.path!r} in {owner.path!r}")
    if graph is None:
        raise StoreError("promotion needs the graph store, which is unavailable")
    moved_graph = graph.rescope_document(document_id, sorted(sources), target.path)
    where = combine(Condition("document_id", "document_id", "eq", document_id),
                    Condition("scope", "scope_path", "in", sorted(sources)))
    moved = sum(vectors.rescope(s, where, target) for s in strategies)
    return Promotion(document_id=document_id, from_scopes=sorted(sources), to_scope=target.path,
                     weaviate_objects=moved, neo4j_chunks=moved_graph)
