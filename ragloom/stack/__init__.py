"""The local stack: a real Weaviate and a real Neo4j (and, with ``llm=True``, llama.cpp's llama-server with a
small GGUF model), provisioned into a cache and run on loopback.

`up` is idempotent: it provisions what is missing, generates credentials once (kept under the data
directory, mode 0600, unless the environment sets them), starts what is not running and waits until
both servers answer. `down` stops what it started. `status` reports without changing anything.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragloom import files
from ragloom.settings import Settings
from ragloom.stack import llama, neo4j, weaviate


def _ensure_secret(path: Path, current: str) -> str:
    if current:
        return current
    if not path.exists():
        files.write_private(path, secrets.token_urlsafe(24))
    return path.read_text().strip()


def up(settings: Settings | None = None, llm: bool = False) -> Settings:
    """Start both servers (provisioning them first if needed); returns settings with the credentials.

    ``llm``: also the local llama-server, unless RAGLOOM_LLM_BASE_URL names another endpoint. Its URL, model
    name and key are left under the stack directory, where ``Settings.from_env`` finds them.
    """
    settings = settings or Settings.from_env()
    stack = settings.stack_dir
    settings = dataclasses.replace(
        settings,
        weaviate_api_key=_ensure_secret(stack / "weaviate.api_key", settings.weaviate_api_key),
        neo4j_password=_ensure_secret(stack / "neo4j.password", settings.neo4j_password),
    )
    started = time.monotonic()
    starts: dict[str, Callable[[], float]] = {}
    if not settings.weaviate_url:
        starts["weaviate"] = lambda: weaviate.start(settings, settings.weaviate_api_key)
    if not settings.neo4j_uri:
        starts["neo4j"] = lambda: neo4j.start(settings, settings.neo4j_password)
    for name, waited in _side_by_side(starts).items():
        print(f"[ragloom stack] {name} ready ({waited:.1f}s)", flush=True)
    if llm and not _external_llm(settings):
        key = _ensure_secret(stack / "llm.api_key", "")
        waited = llama.start(settings, key)
        print(f"[ragloom stack] llama-server ready ({waited:.1f}s)", flush=True)
        files.write_private(stack / "llm.model", llama.model_name(settings))
        files.write_private(stack / "llm.base_url", llama.base_url(settings))
        settings = dataclasses.replace(settings, llm_base_url=llama.base_url(settings),
                                       llm_model=settings.llm_model or llama.model_name(settings), llm_api_key=key)
    print(f"[ragloom stack] up in {time.monotonic() - started:.1f}s; data in {stack}", flush=True)
    return settings


def _side_by_side(starts: dict[str, Callable[[], float]]) -> dict[str, float]:
    """Each start in a thread of its own: a cold start waits for the slower server (Neo4j's JVM), not for the sum
    of both. Daemon threads, so Ctrl-C during a build or a wait ends the command at once; the first error is
    raised once every start has ended."""
    waited: dict[str, float] = {}
    errors: list[BaseException] = []

    def run(name: str, start: Callable[[], float]) -> None:
        try:
            waited[name] = start()
        except BaseException as e:  # noqa: BLE001 - raised below in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=item, name=f"stack-up-{item[0]}", daemon=True)
               for item in starts.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return {name: waited[name] for name in starts}


def _external_llm(settings: Settings) -> bool:
    return bool(settings.llm_base_url) and settings.llm_base_url != llama.base_url(settings)


def down(settings: Settings | None = None) -> dict[str, bool]:
    settings = settings or Settings.from_env()
    (settings.stack_dir / "llm.base_url").unlink(missing_ok=True)  # no model configured once it is gone
    return {"weaviate": weaviate.process(settings).stop(), "neo4j": neo4j.process(settings).stop(timeout=60),
            "llama-server": llama.process(settings).stop()}


def status(settings: Settings | None = None) -> dict[str, Any]:
    settings = settings or Settings.from_env()
    wv, nj = weaviate.process(settings), neo4j.process(settings)
    return {
        "weaviate": {
            "managed_pid": wv.pid(),
            "ready": weaviate.ready(settings),
            "url": f"http://{settings.weaviate_host}:{settings.weaviate_http_port}",
            "grpc_port": settings.weaviate_grpc_port,
            "version": weaviate.version(settings),
            "binary": str(weaviate.binary_path(settings)) if not settings.weaviate_binary else settings.weaviate_binary,
            "auth": "api-key" if settings.weaviate_api_key else "anonymous",
        },
        "neo4j": {
            "managed_pid": nj.pid(),
            "ready": neo4j.ready(settings),
            "uri": settings.resolved_neo4j_uri,
            "version": neo4j.server_version(settings),
            "home": str(neo4j.home(settings)),
        },
        "llm": {
            "managed_pid": llama.process(settings).pid(),
            "ready": llama.ready(settings) if not _external_llm(settings) else None,
            "url": settings.llm_base_url or None,
            "model": settings.llm_model or None,
            "binary": str(llama.binary_path(settings)),
            "version": llama.version(settings),
        },
        "data_dir": str(settings.data_dir),
        "cache_dir": str(settings.cache_dir),
    }
