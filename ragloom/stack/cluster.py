"""The cluster profile on loopback: Postgres (Dagster's storage), Redis (Celery's broker), Celery workers and a
Dagster code server, each a real process started from the machine's own packages.

`up` is idempotent like the single-machine stack: it initialises what is missing, starts what is not running and
waits until each part answers. Ports, worker count and credentials are settings (RAGLOOM_POSTGRES_PORT,
RAGLOOM_REDIS_PORT, RAGLOOM_CELERY_WORKERS, RAGLOOM_CODE_SERVER_PORT); passwords are generated once into the
stack directory (mode 0600) unless the environment sets them. On a real cluster the same three services are
managed ones (RDS/Cloud SQL, ElastiCache/Memorystore) and the workers are pods: see deploy/.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ragloom import files
from ragloom.errors import StackError
from ragloom.settings import REPO_ROOT, Settings
from ragloom.stack.process import ManagedProcess, port_open, wait_until
from ragloom.types import sha256_hex

CLUSTER_DIR = REPO_ROOT / "deploy" / "cluster"
POSTGRES_DB = "dagster"
CREATE_DATABASE = 'CREATE DATABASE "dagster"'  # POSTGRES_DB; DDL takes no parameters, so a constant
POSTGRES_USER = "ragloom"
CLUSTER_NAMESPACE = "ragloom_cluster"


def _log(msg: str) -> None:
    print(f"[ragloom stack] cluster: {msg}", flush=True)


# --- where things live ----------------------------------------------------------------------------------

def cluster_home(settings: Settings) -> Path:
    """DAGSTER_HOME of the cluster profile (its dagster.yaml points at Postgres)."""
    return settings.data_dir / "dagster-cluster"


def postgres_dir(settings: Settings) -> Path:
    """Postgres refuses to run as root; as root its data lives where the `postgres` user can reach it, one
    cluster per data directory: the password it was initialised with is generated into that data directory
    (``stack/postgres.password``), so a second or a wiped RAGLOOM_DATA_DIR must not find the first one's cluster."""
    if os.geteuid() == 0:
        key = sha256_hex(str(settings.data_dir.resolve()))[:12]
        return Path("/var/lib/ragloom") / f"postgres-{settings.postgres_port}-{key}"
    return settings.stack_dir / "postgres"


def _proc(settings: Settings, name: str) -> ManagedProcess:
    root = settings.stack_dir / "cluster"
    return ManagedProcess(name, root / f"{name}.pid", root / f"{name}.log")


def worker_names(settings: Settings) -> list[str]:
    return [f"ragloom-worker-{i}" for i in range(1, settings.celery_workers + 1)]


# --- the environment every part of the profile shares -------------------------------------------------

def with_secrets(settings: Settings) -> Settings:
    from ragloom.stack import _ensure_secret  # deferred: ragloom.stack's package imports this profile's parts

    return dataclasses.replace(
        settings,
        postgres_password=_ensure_secret(settings.stack_dir / "postgres.password", settings.postgres_password),
        redis_password=_ensure_secret(settings.stack_dir / "redis.password", settings.redis_password),
    )


def broker_url(settings: Settings, db: int = 0) -> str:
    return f"redis://:{settings.redis_password}@127.0.0.1:{settings.redis_port}/{db}"


def client_env(settings: Settings) -> dict[str, str]:
    """Variables a process needs to join the profile: Dagster's instance, the Celery executor, Postgres and
    the Weaviate cluster."""
    from ragloom.stack import weaviate_cluster  # deferred: ragloom.stack's package imports this profile's parts

    return {
        **weaviate_cluster.client_env(settings),
        "DAGSTER_HOME": str(cluster_home(settings)),
        "RAGLOOM_EXECUTOR": "celery",
        "RAGLOOM_CELERY_BROKER": broker_url(settings, 0),
        "RAGLOOM_CELERY_BACKEND": broker_url(settings, 1),
        "RAGLOOM_POSTGRES_HOST": "127.0.0.1",
        "RAGLOOM_POSTGRES_PORT": str(settings.postgres_port),
        "RAGLOOM_POSTGRES_USER": POSTGRES_USER,
        "RAGLOOM_POSTGRES_PASSWORD": settings.postgres_password,
        "RAGLOOM_POSTGRES_DB": POSTGRES_DB,
        # the cluster profile's Weaviate is its own; its graph and artifacts are kept apart from the single
        # node's so switching profiles never mixes the two
        "RAGLOOM_GRAPH_NAMESPACE": CLUSTER_NAMESPACE,
        "RAGLOOM_ARTIFACTS_DIR": str(settings.data_dir / "artifacts-cluster"),
    }


def _child_env(settings: Settings) -> dict[str, str]:
    env = {**os.environ, **client_env(settings)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


# --- Postgres --------------------------------------------------------------------------------------------

def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    path = found[-1] if found else shutil.which(name)
    if not path:
        raise StackError(f"PostgreSQL's {name} not found: install Debian's postgresql (apt-get install postgresql)")
    return path


def _as_postgres(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--", *argv]


def _pg_ready(settings: Settings) -> bool:
    return port_open("127.0.0.1", settings.postgres_port)


def start_postgres(settings: Settings) -> float:
    proc = _proc(settings, "postgres")
    if proc.up(lambda: _pg_ready(settings), (settings.postgres_port,), "Postgres", "RAGLOOM_POSTGRES_PORT"):
        return 0.0
    data = postgres_dir(settings)
    if not (data / "PG_VERSION").exists():
        _log(f"initialising Postgres in {data}")
        data.mkdir(parents=True, exist_ok=True)
        pwfile = data.parent / f".pw-{settings.postgres_port}"
        files.write_private(pwfile, settings.postgres_password + "\n")
        if os.geteuid() == 0:
            shutil.chown(data, "postgres", "postgres")
            shutil.chown(pwfile, "postgres", "postgres")
        try:
            _run(_as_postgres([_pg_bin("initdb"), "-D", str(data), "-U", POSTGRES_USER, "--auth=scram-sha-256",
                               f"--pwfile={pwfile}", "-E", "UTF8", "--no-instructions"]), "initdb")
        finally:
            pwfile.unlink(missing_ok=True)
    _log(f"starting Postgres on 127.0.0.1:{settings.postgres_port}")
    proc.start(_as_postgres([_pg_bin("postgres"), "-D", str(data), "-p", str(settings.postgres_port),
                             "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={data}",
                             "-c", "max_connections=200"]),
               dict(os.environ), cwd=data)
    waited = proc.wait_ready(lambda: _pg_ready(settings), settings.stack_timeout_seconds, "Postgres")
    _ensure_database(settings)
    return waited


def _ensure_database(settings: Settings) -> None:
    import psycopg2

    conn = psycopg2.connect(host="127.0.0.1", port=settings.postgres_port, user=POSTGRES_USER,
                            password=settings.postgres_password, dbname="postgres")
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (POSTGRES_DB,))
            if cur.fetchone() is None:
                cur.execute(CREATE_DATABASE)
    finally:
        conn.close()


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise StackError(f"{what} failed ({proc.returncode}): {proc.stderr[-2000:] or proc.stdout[-2000:]}")


# --- Redis -----------------------------------------------------------------------------------------------

def start_redis(settings: Settings) -> float:
    proc = _proc(settings, "redis")
    if proc.running():
        return 0.0
    if port_open("127.0.0.1", settings.redis_port):
        raise StackError(f"port {settings.redis_port} is in use by another program: set RAGLOOM_REDIS_PORT")
    server = shutil.which("redis-server")
    if server is None:
        raise StackError("redis-server not found: install Debian's redis-server (apt-get install redis-server)")
    data = settings.stack_dir / "cluster" / "redis"
    data.mkdir(parents=True, exist_ok=True)
    conf = data / "redis.conf"  # the password in a 0600 file, not on the command line
    files.write_private(conf, f"bind 127.0.0.1\nport {settings.redis_port}\ndir {data}\nsave \"\"\nappendonly no\n"
                              f"requirepass {settings.redis_password}\n")
    _log(f"starting Redis on 127.0.0.1:{settings.redis_port}")
    proc.start([server, str(conf)], dict(os.environ), cwd=data)
    return proc.wait_ready(lambda: port_open("127.0.0.1", settings.redis_port), settings.stack_timeout_seconds,
                           "Redis")


# --- Dagster: instance, code server, Celery workers ------------------------------------------------------

def write_instance(settings: Settings) -> Path:
    """The cluster profile's DAGSTER_HOME holds deploy/cluster/dagster.yaml (values come from the environment)."""
    home = cluster_home(settings)
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(CLUSTER_DIR / "dagster.yaml", home / "dagster.yaml")
    return home


def launch_code_server(settings: Settings) -> None:
    proc = _proc(settings, "code-server")
    if proc.running():
        return
    _log(f"starting the Dagster code server on 127.0.0.1:{settings.code_server_port}")
    proc.start([sys.executable, "-m", "dagster", "code-server", "start", "-m", "pipelines.definitions",
                "-h", "127.0.0.1", "-p", str(settings.code_server_port), "--location-name", "ragloom"],
               _child_env(settings), cwd=REPO_ROOT)


def wait_code_server(settings: Settings) -> float:
    proc = _proc(settings, "code-server")
    return proc.wait_ready(lambda: port_open("127.0.0.1", settings.code_server_port),
                           settings.stack_timeout_seconds, "Dagster code server")


def worker(settings: Settings, name: str) -> ManagedProcess:
    return _proc(settings, name)


def start_workers(settings: Settings) -> float:
    """Celery workers listening on Dagster's queue, one step at a time each (what Dagster's CLI would start)."""
    launch_workers(settings)
    return wait_workers(settings)


def launch_workers(settings: Settings) -> None:
    """Start the workers that are not running, without waiting for them."""
    config_dir = settings.stack_dir / "cluster" / "celery"
    config_dir.mkdir(parents=True, exist_ok=True)
    config = config_dir / "dagster_celery_config.py"
    # A step is acknowledged when it ends, not when it starts: a worker process killed mid-step puts its step
    # back on the queue (Celery's WorkerLostError) for another worker; a whole machine lost returns its step
    # after the broker's visibility timeout.
    files.write_private(config, f"broker_url = {broker_url(settings, 0)!r}\n"
                                f"result_backend = {broker_url(settings, 1)!r}\n"
                                "worker_prefetch_multiplier = 1\ntask_acks_late = True\n"
                                "task_reject_on_worker_lost = True\n"
                                "broker_transport_options = {'visibility_timeout': 600}\n")
    env = _child_env(settings)
    env["PYTHONPATH"] = os.pathsep.join((str(config_dir), env["PYTHONPATH"]))
    celery = shutil.which("celery", path=env.get("PATH")) or str(Path(sys.executable).parent / "celery")
    for name in worker_names(settings):
        proc = worker(settings, name)
        if proc.running():
            continue
        _log(f"starting Celery worker {name}")
        if proc.log_file.exists():  # readiness is read from this start's log, not an earlier one's
            proc.log_file.replace(proc.log_file.with_suffix(".log.1"))
        proc.start([celery, "-A", "dagster_celery.app", "worker", "-Q", "dagster", "-n", f"{name}@%h",
                    "--concurrency", "1", "--prefetch-multiplier", "1", "--loglevel", "INFO",
                    "--without-gossip", "--without-mingle"], env, cwd=REPO_ROOT)


def wait_workers(settings: Settings) -> float:
    return wait_until(lambda: len(ready_workers(settings)) >= settings.celery_workers,
                      settings.stack_timeout_seconds, "Celery workers",
                      worker(settings, worker_names(settings)[0]).log_file)


def worker_children(settings: Settings, name: str) -> list[int]:
    """Pids of the processes a worker runs its steps in (Celery's prefork pool)."""
    import psutil

    pid = worker(settings, name).pid()
    return [] if pid is None else [child.pid for child in psutil.Process(pid).children(recursive=True)]


def ready_workers(settings: Settings) -> list[str]:
    """Names of the workers whose log says they are ready to take tasks."""
    ready = []
    for name in worker_names(settings):
        proc = worker(settings, name)
        if proc.running() and proc.log_file.exists() and " ready." in proc.log_file.read_text(errors="replace"):
            ready.append(name)
    return ready


# --- lifecycle -------------------------------------------------------------------------------------------

def up(settings: Settings) -> Settings:
    """Start the profile (the single-machine stack's Neo4j and credentials must be up already)."""
    from ragloom.stack import weaviate_cluster  # deferred: ragloom.stack's package imports this profile's parts

    settings = with_secrets(settings)
    write_instance(settings)
    try:
        # The Weaviate nodes form their cluster, the code server and the workers import the pipelines: all at
        # once (serially they took ~30 s); the workers need only Redis, so Postgres and Redis come first.
        weaviate_cluster.launch(settings, settings.weaviate_api_key)
        for what, start in (("postgres", start_postgres), ("redis", start_redis)):
            _log(f"{what} ready ({start(settings):.1f}s)")
        launch_code_server(settings)
        launch_workers(settings)
        for what, wait in (("weaviate cluster", weaviate_cluster.wait_ready), ("code server", wait_code_server),
                           ("workers", wait_workers)):
            _log(f"{what} ready ({wait(settings):.1f}s)")
    except BaseException:
        # a part that failed to start leaves none of the others running (they would hold the profile's ports)
        _log("start-up failed: stopping what was started")
        down(settings)
        raise
    return settings


def down(settings: Settings) -> dict[str, bool]:
    """Stop the profile: the workers, the code server and the Weaviate nodes at once, then Redis and Postgres (a
    worker shuts down through its broker). Returns which processes were running."""
    from concurrent.futures import ThreadPoolExecutor

    from ragloom.stack import weaviate_cluster  # deferred: ragloom.stack's package imports this profile's parts

    def stop(name: str) -> bool:
        return _proc(settings, name).stop(timeout=60)

    first, last = [*worker_names(settings), "code-server"], ["redis", "postgres"]
    with ThreadPoolExecutor(len(first) + 1) as pool:
        nodes = pool.submit(weaviate_cluster.stop, settings)
        stopped = dict(zip(first, pool.map(stop, first), strict=True))
        stopped.update(zip(last, pool.map(stop, last), strict=True))
        stopped.update(nodes.result())
    return stopped


def status(settings: Settings) -> dict[str, Any]:
    names = ["postgres", "redis", "code-server", *worker_names(settings)]
    return {
        "processes": {name: {"pid": _proc(settings, name).pid()} for name in names},
        "ready_workers": ready_workers(settings),
        "dagster_home": str(cluster_home(settings)),
        "postgres": f"127.0.0.1:{settings.postgres_port}",
        "redis": f"127.0.0.1:{settings.redis_port}",
        "code_server": f"127.0.0.1:{settings.code_server_port}",
    }
