"""GET /healthz (the process answers), /readyz (both stores answer), /metrics (Prometheus text)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from ragloom.stores.service_ops import neo4j_ready, weaviate_ready

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    rag = request.app.state.rag

    def check() -> dict[str, bool]:
        graph, _ = rag.context.graph()
        return {"weaviate": weaviate_ready(rag.context.vectors), "neo4j": graph is not None and neo4j_ready(graph)}

    stores = await rag.run_blocking(check)
    ready = all(stores.values())
    return JSONResponse({"ready": ready, "stores": stores}, status_code=200 if ready else 503)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request) -> PlainTextResponse:
    return PlainTextResponse(request.app.state.metrics.render(), media_type="text/plain; version=0.0.4")
