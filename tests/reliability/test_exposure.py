"""What the local stack exposes beyond loopback requires credentials.

tests/integration/test_stack.py checks that HTTP and Bolt listen on loopback only and that Weaviate's HTTP API
and Neo4j refuse missing or default credentials. Two Weaviate ports listen on every interface (not
configurable in 1.39): gRPC, which carries every query and write, and the intra-cluster data port. This
module knocks on both from the machine's own non-loopback address, as a neighbour on the network would.
"""

from __future__ import annotations

import importlib
import pkgutil
import socket
import urllib.error
import urllib.request

import pytest
from polling import tcp_sockets


def outside_address() -> str:
    """This machine's address on its default route (no packet is sent); loopback when it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("203.0.113.1", 9))  # TEST-NET-3: UDP connect only picks a route, nothing is sent
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def listening_everywhere(port: int) -> bool:
    return any(set(address) == {"0"} for address, _ in tcp_sockets(port))


def grpc_search(settings, host: str, key: str | None) -> str:
    """One raw gRPC Search through ``host`` (no HTTP call first, as the client would make); the error text."""
    import grpc

    versions = sorted(m.name for m in pkgutil.iter_modules(importlib.import_module("weaviate.proto.v1").__path__)
                      if m.name.startswith("v"))
    proto = f"weaviate.proto.v1.{versions[-1]}.v1"  # the newest protocol the installed client carries
    stub_module = importlib.import_module(f"{proto}.weaviate_pb2_grpc")
    search = importlib.import_module(f"{proto}.search_get_pb2")
    with grpc.insecure_channel(f"{host}:{settings.weaviate_grpc_port}") as channel:
        try:
            stub_module.WeaviateStub(channel).Search(
                search.SearchRequest(collection="RagloomExposureProbe", limit=1), timeout=10,
                metadata=[("authorization", f"Bearer {key}")] if key is not None else [])
            return ""
        except grpc.RpcError as e:
            return f"{e.code().name}: {e.details()}"


def test_weaviate_grpc_from_outside_loopback_needs_the_key(settings, report):
    assert settings.weaviate_api_key, "the local stack always generates a key"
    host = outside_address()
    assert listening_everywhere(settings.weaviate_grpc_port)  # the reason this test exists
    keys = {"no key": None, "wrong key": "not-" + settings.weaviate_api_key, "the key": settings.weaviate_api_key}
    outcomes = {label: grpc_search(settings, host, key) for label, key in keys.items()}
    report(host=host, port=settings.weaviate_grpc_port, outcomes={k: v[:160] for k, v in outcomes.items()})
    for label in ("no key", "wrong key"):
        assert "unauthorized" in outcomes[label].lower() or "UNAUTHENTICATED" in outcomes[label], outcomes[label]
    # with the key the request gets through authentication and fails only because the collection is absent
    assert "could not find class" in outcomes["the key"], outcomes["the key"]


def test_weaviate_cluster_data_port_from_outside_loopback_needs_credentials(settings, report):
    port = settings.weaviate_http_port + 2  # CLUSTER_DATA_BIND_PORT in ragloom.stack.weaviate
    if not listening_everywhere(port):
        pytest.fail(f"expected Weaviate's cluster data port {port} to listen (on every interface)")
    url = f"http://{outside_address()}:{port}/indices/RagloomExposureProbe/shards/x/objects"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, timeout=5)
    report(url=url, status=refused.value.code)
    assert refused.value.code == 401
