"""POST /v1/admin/promote: an admin key moves a document up to its tenant or to __shared__, in both stores,
without re-embedding (only the scope properties change).

Who may move what (docs/security.md): admin keys are tenant-wide, and a promotion reads source documents only
inside the admin's own subtree (its tenant). To the tenant: from any scope below it (the tenant already reads its
users' scopes). To __shared__, which every tenant reads: only a document that is already the tenant's own (at the
tenant scope), so a user's private document crosses one boundary per deliberate act, never two in one request.
Every promotion is logged with the key id."""

from __future__ import annotations

import logging

from fastapi import APIRouter, HTTPException, Request

from ragloom.dynamic import owner_conditions
from ragloom.filters import Condition, combine
from ragloom.service.auth import AdminDep
from ragloom.service.models import PromoteRequest, PromoteResponse
from ragloom.stores.service_ops import rescope, scope_paths_where
from ragloom.types import Scope

router = APIRouter(prefix="/v1/admin", tags=["admin"])
log = logging.getLogger("ragloom.service.admin")


def promotable(sources: set[str], owner: Scope, target: Scope) -> set[str]:
    """The scopes a promotion by ``owner`` (the admin's scope: a tenant) may move to ``target``: strictly below
    the target, inside the owner's subtree; to __shared__ only from the owner's own scope."""
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


def promote_document(rag, strategies: list[str], document_id: str, owner: Scope, target: Scope) -> PromoteResponse:
    vectors = rag.context.vectors
    owned = [Condition("document_id", "document_id", "eq", document_id), *owner_conditions(owner)]
    found: set[str] = set()
    for strategy in strategies:
        found |= scope_paths_where(vectors, strategy, combine(*owned))
    sources = promotable(found, owner, target)
    if not sources:
        if found and not target.tenant:
            raise HTTPException(409, f"document {document_id!r} is not at the tenant scope {owner.path!r}: promote "
                                     "it to the tenant first (only the tenant's own documents go to __shared__)")
        raise HTTPException(404, f"no document {document_id!r} below {target.path!r} in {owner.path!r}")
    graph, why = rag.context.graph()
    if graph is None:
        log.warning("promotion of %r refused: %s", document_id, why)
        raise HTTPException(503, "promotion needs the graph store, which is unavailable")
    moved_graph = graph.rescope_document(document_id, sorted(sources), target.path)  # first: re-runnable
    where = combine(Condition("document_id", "document_id", "eq", document_id),
                    Condition("scope", "scope_path", "in", sorted(sources)))
    moved = sum(rescope(vectors, s, where, target) for s in strategies)
    return PromoteResponse(document_id=document_id, from_scopes=sorted(sources), to_scope=target.path,
                           weaviate_objects=moved, neo4j_chunks=moved_graph)


@router.post("/promote", response_model=PromoteResponse, summary="Move a document to the tenant or __shared__")
async def promote(body: PromoteRequest, request: Request, who: AdminDep) -> PromoteResponse:
    target = Scope(who.tenant) if body.to == "tenant" else Scope()
    state = request.app.state
    moved = await state.rag.run_blocking(promote_document, state.rag, list(state.settings.chunkings),
                                         body.document_id, who.scope, target)
    log.info("promotion by key %s: %r from %s to %s", who.key_id, body.document_id, moved.from_scopes, moved.to_scope)
    return moved
