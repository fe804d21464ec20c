"""The query service: `ragloom serve` runs ``create_app`` under uvicorn (FastAPI: pydantic models that are the
OpenAPI docs, dependencies for authentication, async routes over a bounded thread pool)."""

from __future__ import annotations

import copy
import dataclasses
import os
from typing import Any

from ragloom.settings import Settings, env_name


def serve(settings: Settings | None = None, host: str | None = None, port: int | None = None) -> None:
    """Run the service in the foreground until interrupted. With ``service_processes`` > 1, uvicorn starts that many
    processes on the one socket, each building its app from the environment (``create_app()``): the GIL holds one
    process's Python work to one core, and a graph_rag query is mostly Python and numpy between store calls."""
    import uvicorn

    from ragloom.query import load_profiles  # deferred: as below
    from ragloom.service.app import create_app  # deferred: FastAPI and uvicorn load only when serving

    settings = settings or Settings.from_env()
    load_profiles(settings.agent_profiles)  # a bad profiles file stops here, with its reason, before uvicorn starts
    # the address bound is the one the app sees: /metrics is open or keyed by it (Settings.metrics_need_key)
    settings = dataclasses.replace(settings, service_host=host or settings.service_host,
                                   service_port=port or settings.service_port)
    if settings.service_processes > 1:
        # the processes read their settings from the environment: the address bound must be the one they see
        os.environ[env_name("service_host")] = settings.service_host
        os.environ[env_name("service_port")] = str(settings.service_port)
        os.environ[env_name("service_processes")] = str(settings.service_processes)
        uvicorn.run("ragloom.service.app:create_app", factory=True, workers=settings.service_processes,
                    host=settings.service_host, port=settings.service_port, log_level="info", proxy_headers=False,
                    log_config=log_config())
        return
    uvicorn.run(create_app(settings), host=settings.service_host, port=settings.service_port, log_level="info",
                proxy_headers=False, log_config=log_config())


def log_config() -> dict[str, Any]:
    """uvicorn's logging, with ragloom's own records beside its lines: the ready line, the promotion audit, the
    sweeps of expired items (without it they went nowhere: nothing else configures logging in the served process)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["ragloom"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    return config
