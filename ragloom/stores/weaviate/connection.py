"""Opening a Weaviate client from Settings: the local stack, a self-hosted URL, or Weaviate Cloud."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

from ragloom.errors import StoreError
from ragloom.settings import Settings

CLOUD_HOST_SUFFIXES = (".weaviate.cloud", ".weaviate.network", ".wcs.api")

# The gRPC channel's options, for a server that goes away and comes back:
# - each client keeps connections of its own: gRPC shares them by default between channels to one address, with
#   their reconnect back-off, and a client opened right after a restart failed its first call ("failed to connect
#   to all addresses" / "Socket closed") while an older one still waited out its back-off;
# - reads (Search: every query and object read; Aggregate: counts) wait for the server up to the query timeout
#   (waitForReady) instead of failing at once, which sent them into weaviate-client's own retries: 63 s on a
#   server that is down, whatever RAGLOOM_WEAVIATE_QUERY_TIMEOUT_SECONDS said. A restart within the timeout is
#   ridden out. Writes keep the client's retries (ragloom.indexing.vectors expects them);
# - a reconnect is tried at least every 2 s (gRPC's default back-off grows to 2 minutes), so a waiting read goes
#   on soon after the server is back.
_READS = [{"service": "weaviate.v1.Weaviate", "method": method} for method in ("Search", "Aggregate")]
GRPC_CHANNEL_OPTIONS = [("grpc.use_local_subchannel_pool", 1),
                        ("grpc.service_config", json.dumps({"methodConfig": [{"name": _READS, "waitForReady": True}]})),
                        ("grpc.max_reconnect_backoff_ms", 2000)]


def api_key(settings: Settings) -> str:
    """The configured key, else the one the local stack generated in ``settings.stack_dir`` (``Settings.from_env``
    reads that file too; this covers Settings built without it, e.g. ``dataclasses.replace`` of a data dir)."""
    if settings.weaviate_api_key or settings.weaviate_url:
        return settings.weaviate_api_key
    generated = settings.stack_dir / "weaviate.api_key"
    return generated.read_text().strip() if generated.exists() else ""


def open_client(settings: Settings) -> Any:
    """A connected ``weaviate.WeaviateClient`` for the local stack (host/ports from settings) or for
    ``settings.weaviate_url``; StoreError when it cannot connect.

    A URL on weaviate.cloud / weaviate.network / wcs.api is a Weaviate Cloud cluster; any other URL
    is a self-hosted server reached over HTTP(S) at that URL and gRPC at the same host on
    ``weaviate_grpc_port`` (TLS when the URL is https).
    """
    import weaviate
    from weaviate.classes.init import AdditionalConfig, Auth, GrpcConfig, Timeout

    config = AdditionalConfig(timeout=Timeout(insert=settings.weaviate_write_timeout_seconds,
                                              query=settings.weaviate_query_timeout_seconds),
                              grpc_config=GrpcConfig(channel_options=GRPC_CHANNEL_OPTIONS))
    key = api_key(settings)
    auth = Auth.api_key(key) if key else None
    where = settings.weaviate_url or (f"http://{settings.weaviate_host}:{settings.weaviate_http_port} "
                                      f"(gRPC {settings.weaviate_grpc_port})")
    try:
        if not settings.weaviate_url:
            return weaviate.connect_to_local(host=settings.weaviate_host, port=settings.weaviate_http_port,
                                             grpc_port=settings.weaviate_grpc_port, auth_credentials=auth,
                                             additional_config=config)
        url = urlparse(settings.weaviate_url if "://" in settings.weaviate_url else f"https://{settings.weaviate_url}")
        host = url.hostname or ""
        if host.endswith(CLOUD_HOST_SUFFIXES):
            if auth is None:
                raise StoreError(f"RAGLOOM_WEAVIATE_URL={settings.weaviate_url} is a Weaviate Cloud "
                                 "cluster: set RAGLOOM_WEAVIATE_API_KEY")
            return weaviate.connect_to_weaviate_cloud(cluster_url=settings.weaviate_url, auth_credentials=auth,
                                                      additional_config=config)
        secure = url.scheme == "https"
        return weaviate.connect_to_custom(
            http_host=host, http_port=url.port or (443 if secure else 80), http_secure=secure,
            grpc_host=host, grpc_port=settings.weaviate_grpc_port, grpc_secure=secure, auth_credentials=auth,
            additional_config=config)
    except StoreError:
        raise
    except Exception as e:  # connect_* raise startup, connection, auth and gRPC errors alike
        raise StoreError(f"Weaviate at {where} is unreachable or refused the connection "
                         f"({type(e).__name__}: {e}); for the local stack run `ragloom stack up`") from e
