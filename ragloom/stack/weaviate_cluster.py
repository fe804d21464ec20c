"""A Weaviate cluster on loopback: RAGLOOM_WEAVIATE_NODES nodes of the same binary, each with its own data
directory and ports, joined by gossip and Raft. What `ragloom stack up --profile cluster` runs.

Ports of node i (0-based), from the single node's HTTP port P and gRPC port G: HTTP P+100(i+1), gRPC G+100(i+1),
gossip HTTP+1, data HTTP+2, Raft HTTP+3 and Raft's internal RPC HTTP+4 (with CLUSTER_IN_LOCALHOST Weaviate
requires RPC = Raft + 1). In production the nodes are separate hosts behind a load balancer and the client
connects to that; here it connects to node 0, and any node serves any request.
"""

from __future__ import annotations

import dataclasses

from ragloom.settings import Settings
from ragloom.stack import weaviate
from ragloom.stack.process import ManagedProcess, wait_until


@dataclasses.dataclass(frozen=True)
class Node:
    index: int
    http_port: int
    grpc_port: int

    @property
    def name(self) -> str:
        return f"node{self.index}"

    @property
    def raft_port(self) -> int:
        return self.http_port + 3


def nodes(settings: Settings) -> list[Node]:
    return [Node(i, settings.weaviate_http_port + 100 * (i + 1), settings.weaviate_grpc_port + 100 * (i + 1))
            for i in range(settings.weaviate_nodes)]


def node_settings(settings: Settings, node: Node) -> Settings:
    """Settings that point a client (or a readiness check) at ``node``."""
    return dataclasses.replace(settings, weaviate_http_port=node.http_port, weaviate_grpc_port=node.grpc_port,
                               weaviate_url="")


def client_env(settings: Settings) -> dict[str, str]:
    """Variables that point ragloom at the cluster (node 0) with replicated collections."""
    first = nodes(settings)[0]
    return {
        "RAGLOOM_WEAVIATE_HTTP_PORT": str(first.http_port),
        "RAGLOOM_WEAVIATE_GRPC_PORT": str(first.grpc_port),
        "RAGLOOM_WEAVIATE_REPLICATION_FACTOR": str(min(3, settings.weaviate_nodes)),
    }


def process(settings: Settings, node: Node) -> ManagedProcess:
    root = settings.stack_dir / "weaviate-cluster" / node.name
    return ManagedProcess(f"weaviate-{node.name}", root / "weaviate.pid", root / "weaviate.log")


def _env(settings: Settings, api_key: str, node: Node) -> dict[str, str]:
    all_nodes = nodes(settings)
    env = weaviate.server_env(node_settings(settings, node), api_key)
    env.update({
        "PERSISTENCE_DATA_PATH": str(settings.stack_dir / "weaviate-cluster" / node.name / "data"),
        "CLUSTER_HOSTNAME": node.name,
        "CLUSTER_GOSSIP_BIND_PORT": str(node.http_port + 1),
        "CLUSTER_DATA_BIND_PORT": str(node.http_port + 2),
        "RAFT_PORT": str(node.raft_port),
        "RAFT_INTERNAL_RPC_PORT": str(node.raft_port + 1),
        "RAFT_BOOTSTRAP_EXPECT": str(len(all_nodes)),
        "RAFT_JOIN": ",".join(f"{n.name}:{n.raft_port}" for n in all_nodes),
        "GRPC_PORT": str(node.grpc_port),
        "GOMAXPROCS": "1",  # three nodes share the machine's cores
        # Async replication repairs a node that missed writes. Its defaults compare replicas every 30 s and
        # skip objects younger than 30 s, so a restarted node held everything only ~a minute later; on
        # loopback a 5 s hash beat (Weaviate's minimum) and a 5 s delay repair it within seconds.
        "ASYNC_REPLICATION_FREQUENCY": "5s",
        "ASYNC_REPLICATION_PROPAGATION_DELAY": "5s",
    })
    if node.index > 0:
        env["CLUSTER_JOIN"] = f"127.0.0.1:{all_nodes[0].http_port + 1}"
    return env


def start_node(settings: Settings, api_key: str, node: Node) -> None:
    proc = process(settings, node)
    if proc.running():
        return
    binary = weaviate.provision(settings)
    data = settings.stack_dir / "weaviate-cluster" / node.name / "data"
    data.mkdir(parents=True, exist_ok=True)
    proc.start([str(binary), "--host", "127.0.0.1", "--port", str(node.http_port), "--scheme", "http"],
               _env(settings, api_key, node), cwd=data.parent)


def ready(settings: Settings, node: Node) -> bool:
    return weaviate.ready(node_settings(settings, node))


def start(settings: Settings, api_key: str) -> float:
    """Start every node that is not running; returns seconds until all are ready."""
    launch(settings, api_key)
    return wait_ready(settings)


def launch(settings: Settings, api_key: str) -> None:
    """Start every node that is not running, without waiting (they form their cluster meanwhile)."""
    for node in nodes(settings):
        start_node(settings, api_key, node)


def wait_ready(settings: Settings) -> float:
    """Seconds until every node is ready; StackError if one exits or the stack timeout passes."""
    first = nodes(settings)[0]
    return wait_until(lambda: all(ready(settings, n) for n in nodes(settings)), settings.stack_timeout_seconds,
                      "the Weaviate cluster", process(settings, first).log_file,
                      alive=lambda: all(process(settings, n).running() for n in nodes(settings)))


def stop(settings: Settings) -> dict[str, bool]:
    """Stop every node (all at once: each shuts down gracefully on its own); which ones were running."""
    from concurrent.futures import ThreadPoolExecutor

    all_nodes = nodes(settings)
    with ThreadPoolExecutor(len(all_nodes)) as pool:
        return dict(zip((f"weaviate-{n.name}" for n in all_nodes),
                        pool.map(lambda n: process(settings, n).stop(), all_nodes), strict=True))
