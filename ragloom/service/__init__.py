"""The query service: `ragloom serve` runs ``create_app`` under uvicorn (FastAPI: pydantic models that are the
OpenAPI docs, dependencies for authentication, async routes over a bounded thread pool)."""

from __future__ import annotations

import dataclasses

from ragloom.settings import Settings


def serve(settings: Settings | None = None, host: str | None = None, port: int | None = None) -> None:
    """Run the service in the foreground until interrupted."""
    import uvicorn

    from ragloom.service.app import create_app  # deferred: FastAPI and uvicorn load only when serving

    settings = settings or Settings.from_env()
    # the address bound is the one the app sees: /metrics is open or keyed by it (Settings.metrics_need_key)
    settings = dataclasses.replace(settings, service_host=host or settings.service_host,
                                   service_port=port or settings.service_port)
    uvicorn.run(create_app(settings), host=settings.service_host, port=settings.service_port, log_level="info",
                proxy_headers=False)
