"""Provision (binary path, release archive, or a Go build) and run a local Weaviate server."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from ragloom.errors import StackError
from ragloom.settings import Settings
from ragloom.stack.process import ManagedProcess, http_ok

# go.mod of weaviate v1.39.0 says `go 1.26`; GOTOOLCHAIN=auto lets an older Go fetch that toolchain
# from the module proxy, so only a Go that predates toolchain switching (< 1.21) is a hard stop.
MIN_GO_FOR_TOOLCHAIN_SWITCH = (1, 21)
RELEASE_URL = "https://github.com/weaviate/weaviate/releases/download/v{v}/weaviate-v{v}-linux-{arch}.tar.gz"


def _log(msg: str) -> None:
    print(f"[ragloom stack] weaviate: {msg}", flush=True)


def binary_path(settings: Settings) -> Path:
    return settings.cache_dir / "weaviate" / settings.weaviate_version / "weaviate-server"


def provision(settings: Settings) -> Path:
    """Return a runnable weaviate-server, fetching or building it once into the cache."""
    if settings.weaviate_binary:
        path = Path(settings.weaviate_binary).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise StackError(f"RAGLOOM_WEAVIATE_BINARY={path} is not an executable file")
        return path
    target = binary_path(settings)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    if _download_release(settings.weaviate_version, target) or _go_build(settings.weaviate_version, target):
        _log(f"provisioned {target} in {time.monotonic() - started:.0f}s")
        return target
    raise StackError("unreachable")  # _go_build raises with advice when it cannot build


def _download_release(version: str, target: Path) -> bool:
    arch = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine())
    if arch is None:
        return False
    url = RELEASE_URL.format(v=version, arch=arch)
    try:
        with urllib.request.urlopen(url, timeout=10) as resp, tempfile.TemporaryDirectory() as tmp:
            archive = Path(tmp) / "weaviate.tgz"
            _log(f"downloading {url}")
            with open(archive, "wb") as f:
                shutil.copyfileobj(resp, f)
            with tarfile.open(archive) as tar:
                member = next((m for m in tar.getmembers() if Path(m.name).name == "weaviate"), None)
                if member is None:
                    return False
                tar.extract(member, tmp, filter="data")
                shutil.move(str(Path(tmp) / member.name), target)
        target.chmod(0o755)
        return True
    except OSError as e:  # URLError is an OSError: unreachable release host, fall through to the build
        _log(f"release archive not reachable ({e.__class__.__name__}: {e}); building from source instead")
        return False


def _go_build(version: str, target: Path) -> bool:
    go = shutil.which("go")
    if go is None:
        raise StackError("cannot provision Weaviate: the release archive is unreachable and Go is not installed. "
                         "Install Go >= 1.21 (https://go.dev/dl) or set RAGLOOM_WEAVIATE_BINARY to a weaviate-server.")
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    try:
        major, minor = (int(x) for x in out.removeprefix("go").split(".")[:2])
    except ValueError:
        major, minor = (0, 0)
    if (major, minor) < MIN_GO_FOR_TOOLCHAIN_SWITCH:
        raise StackError(f"Go {out} is too old to build Weaviate {version} (needs Go >= 1.26, or >= 1.21 to fetch it)")
    _log(f"building github.com/weaviate/weaviate/cmd/weaviate-server@v{version} with {out} "
         "(first time only; 3-10 min on 2 cores, by machine)")
    env = {**os.environ, "GOBIN": str(target.parent), "CGO_ENABLED": "0", "GOTOOLCHAIN": "auto",
           "GOFLAGS": "-trimpath"}
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([go, "install", "-ldflags", "-s -w",
                               f"github.com/weaviate/weaviate/cmd/weaviate-server@v{version}"],
                              env=env, cwd=tmp, capture_output=True, text=True)
    if proc.returncode != 0:
        raise StackError(f"building Weaviate failed (is the Go module proxy reachable?):\n{proc.stderr[-3000:]}")
    return target.is_file()


def process(settings: Settings) -> ManagedProcess:
    root = settings.stack_dir / "weaviate"
    return ManagedProcess("weaviate", root / "weaviate.pid", root / "weaviate.log")


def ready(settings: Settings) -> bool:
    url = f"http://{settings.weaviate_host}:{settings.weaviate_http_port}/v1/.well-known/ready"
    return http_ok(url)


def server_env(settings: Settings, api_key: str) -> dict[str, str]:
    data = settings.stack_dir / "weaviate" / "data"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", ""),
        "PERSISTENCE_DATA_PATH": str(data),
        "DEFAULT_VECTORIZER_MODULE": "none",
        "ENABLE_MODULES": "",
        "DISABLE_TELEMETRY": "true",
        "GO_PROFILING_DISABLE": "true",
        "CLUSTER_HOSTNAME": "ragloom",
        "CLUSTER_IN_LOCALHOST": "true",
        "CLUSTER_BIND_ADDR": "127.0.0.1",
        "CLUSTER_ADVERTISE_ADDR": "127.0.0.1",
        # internal ports, moved off Weaviate's defaults so a second Weaviate on the machine does not clash
        "CLUSTER_GOSSIP_BIND_PORT": str(settings.weaviate_http_port + 1),
        "CLUSTER_DATA_BIND_PORT": str(settings.weaviate_http_port + 2),
        "RAFT_PORT": str(settings.weaviate_http_port + 3),
        "RAFT_INTERNAL_RPC_PORT": str(settings.weaviate_http_port + 4),
        "RAFT_BOOTSTRAP_EXPECT": "1",
        "RAFT_JOIN": "ragloom",
        "GRPC_PORT": str(settings.weaviate_grpc_port),
        "QUERY_DEFAULTS_LIMIT": "25",
        "LIMIT_RESOURCES": "true",
        "GOMAXPROCS": str(os.cpu_count() or 2),
        "LOG_LEVEL": "warning",
    }
    if api_key:
        # Weaviate's gRPC server listens on every interface (not configurable in 1.39), so the local
        # stack always requires a key: loopback-only HTTP plus authenticated gRPC.
        env.update({
            "AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED": "false",
            "AUTHENTICATION_APIKEY_ENABLED": "true",
            "AUTHENTICATION_APIKEY_ALLOWED_KEYS": api_key,
            "AUTHENTICATION_APIKEY_USERS": "ragloom",
            # the intra-cluster data port also listens on every interface: protect it too
            "CLUSTER_BASIC_AUTH_USERNAME": "ragloom",
            "CLUSTER_BASIC_AUTH_PASSWORD": hashlib.sha256(f"cluster:{api_key}".encode()).hexdigest(),
        })
    else:
        env["AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED"] = "true"
    return env


def start(settings: Settings, api_key: str, extra_env: Mapping[str, str] | None = None) -> float:
    """Start the server if it is not running; returns seconds until ready. ``extra_env``: more of the server's own
    settings, over ours (a benchmark's A/B of one, e.g. ``QUERY_HYBRID_MAXIMUM_RESULTS``)."""
    proc = process(settings)
    if proc.up(lambda: ready(settings), (settings.weaviate_http_port, settings.weaviate_grpc_port), "Weaviate",
               "RAGLOOM_WEAVIATE_HTTP_PORT / RAGLOOM_WEAVIATE_GRPC_PORT"):
        return 0.0
    binary = provision(settings)
    (settings.stack_dir / "weaviate" / "data").mkdir(parents=True, exist_ok=True)
    if not proc.running():
        _log(f"starting on http://{settings.weaviate_host}:{settings.weaviate_http_port} "
             f"(gRPC {settings.weaviate_grpc_port})")
        # One node on loopback has no peer to wait for: Raft timeouts at their base values (Weaviate's default
        # multiplier of 5 tolerates network delay between nodes) make the node elect itself in ~1 s, not ~5 s;
        # a start or restart is ready in ~2.5 s instead of 6-9 s. The cluster nodes keep the default.
        env = {**server_env(settings, api_key), "RAFT_TIMEOUTS_MULTIPLIER": "1", **(extra_env or {})}
        proc.start([str(binary), "--host", settings.weaviate_host, "--port", str(settings.weaviate_http_port),
                    "--scheme", "http"], env, cwd=settings.stack_dir / "weaviate")
    return proc.wait_ready(lambda: ready(settings), settings.stack_timeout_seconds, "Weaviate")


def version(settings: Settings) -> str | None:
    import json

    url = f"http://{settings.weaviate_host}:{settings.weaviate_http_port}/v1/meta"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {settings.weaviate_api_key}"}
                                 if settings.weaviate_api_key else {})
    try:
        with urllib.request.urlopen(req, timeout=2) as resp:
            return json.load(resp).get("version")
    except (OSError, ValueError):
        return None
