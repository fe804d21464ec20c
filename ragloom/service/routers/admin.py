"""POST /v1/admin/promote: an admin key moves a document up to its tenant or to __shared__, in both stores,
without re-embedding (only the scope properties change)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from ragloom.dynamic import owner_conditions
from ragloom.filters import Condition, combine
from ragloom.service.auth import AdminDep
from ragloom.service.models import PromoteRequest, PromoteResponse
from ragloom.stores.service_ops import rescope, scope_paths_where
from ragloom.types import Scope

router = APIRouter(prefix="/v1/admin", tags=["admin"])


def promote_document(rag, strategies: list[str], document_id: str, tenant: str, target: Scope) -> PromoteResponse:
    vectors = rag.context.vectors
    owned = [Condition("document_id", "document_id", "eq", document_id), *owner_conditions(Scope(tenant))]
    sources: set[str] = set()
    for strategy in strategies:
        sources |= scope_paths_where(vectors, strategy, combine(*owned))
    # only a move up: from strictly below the target, within the admin's tenant
    sources = {p for p in sources if p != target.path and target.path in Scope.from_path(p).visible_paths()}
    if not sources:
        raise HTTPException(404, f"no document {document_id!r} below {target.path!r} in tenant {tenant!r}")
    graph, why = rag.context.graph()
    if graph is None:
        raise HTTPException(503, f"promotion needs the graph store: {why}")
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
    return await state.rag.run_blocking(promote_document, state.rag, list(state.settings.chunkings),
                                        body.document_id, who.tenant, target)
