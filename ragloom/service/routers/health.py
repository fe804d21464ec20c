"""GET /healthz (the process answers), /readyz (both stores answer), /metrics (Prometheus text: open when the service
binds loopback, else a valid key; RAGLOOM_SERVICE_METRICS)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from ragloom.errors import RagloomError
from ragloom.service.auth import caller
from ragloom.stores.neo4j import Neo4jStore
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
        if graph is not None:
            graph_ok = neo4j_ready(graph)
        else:  # the query path remembers a failed first connect: ask the server afresh
            try:
                Neo4jStore.connect(rag.settings).close()
                graph_ok = True
            except RagloomError:
                graph_ok = False
        return {"weaviate": weaviate_ready(rag.context.vectors), "neo4j": graph_ok}

    stores = await rag.run_blocking(check)
    ready = all(stores.values())
    return JSONResponse({"ready": ready, "stores": stores}, status_code=200 if ready else 503)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request) -> PlainTextResponse:
    if request.app.state.settings.metrics_need_key:
        caller(request)  # 401 / 429 like any keyed endpoint
    return PlainTextResponse(request.app.state.metrics.render(), media_type="text/plain; version=0.0.4")
