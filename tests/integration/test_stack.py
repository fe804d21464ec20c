"""The local stack is real: both servers speak their own protocols and require credentials."""

from __future__ import annotations

import pytest
import weaviate
from neo4j import GraphDatabase
from neo4j.exceptions import AuthError
from polling import tcp_sockets
from weaviate.classes.config import Configure, DataType, Property

from ragloom import stack


def test_status_reports_both_servers(settings):
    report = stack.status(settings)
    assert report["weaviate"]["ready"] and report["neo4j"]["ready"]
    assert report["weaviate"]["version"] == settings.weaviate_version
    assert report["neo4j"]["version"].startswith(settings.neo4j_version)
    assert report["neo4j"]["version"].endswith("community")


def test_up_is_idempotent(settings):
    again = stack.up(settings)
    assert again.neo4j_password == settings.neo4j_password
    assert again.weaviate_api_key == settings.weaviate_api_key


def test_weaviate_write_and_read_over_grpc(weaviate_client, namespace):
    name = f"{namespace}Stack"
    collection = weaviate_client.collections.create(
        name, vector_config=Configure.Vectors.self_provided(),
        properties=[Property(name="text", data_type=DataType.TEXT)],
    )
    try:
        uid = collection.data.insert({"text": "hello from ragloom"}, vector=[0.1, 0.2, 0.3])
        found = collection.query.near_vector([0.1, 0.2, 0.3], limit=1, return_properties=["text"])
        assert found.objects[0].uuid == uid
        assert found.objects[0].properties["text"] == "hello from ragloom"
    finally:
        weaviate_client.collections.delete(name)


def test_weaviate_refuses_requests_without_the_key(settings):
    assert settings.weaviate_api_key
    with pytest.raises(weaviate.exceptions.WeaviateBaseError, match="401"):
        client = weaviate.connect_to_local(host=settings.weaviate_host, port=settings.weaviate_http_port,
                                           grpc_port=settings.weaviate_grpc_port)
        client.close()


def test_neo4j_write_and_read_over_bolt(neo4j_driver, namespace):
    neo4j_driver.execute_query("CREATE (:StackProbe {ns: $ns, name: $name})", ns=namespace, name="probe")
    try:
        records, _, _ = neo4j_driver.execute_query("MATCH (n:StackProbe {ns: $ns}) RETURN n.name AS name", ns=namespace)
        assert [r["name"] for r in records] == ["probe"]
    finally:
        neo4j_driver.execute_query("MATCH (n:StackProbe {ns: $ns}) DELETE n", ns=namespace)


def test_neo4j_rejects_the_default_password(settings):
    assert settings.neo4j_password not in ("", "neo4j")
    driver = GraphDatabase.driver(settings.resolved_neo4j_uri, auth=("neo4j", "neo4j"))
    try:
        driver.verify_connectivity()
    except AuthError:
        pass
    else:
        raise AssertionError("Neo4j accepted the default password")
    finally:
        driver.close()


def _listen_addresses(port: int) -> set[str]:
    """Local addresses of LISTEN sockets on ``port``, read from /proc/net/tcp{,6}."""
    return {address for address, _ in tcp_sockets(port)}


LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}


def test_servers_listen_on_loopback_only_where_configurable(settings):
    # Weaviate's gRPC port listens on every interface (not configurable in 1.39): it needs the API key.
    for port in (settings.weaviate_http_port, settings.neo4j_bolt_port, settings.neo4j_http_port):
        addresses = _listen_addresses(port)
        assert addresses, f"nothing listens on {port}"
        assert addresses <= LOOPBACK, f"port {port} listens on {addresses}"
