"""The query service: `ragloom serve` runs ``create_app`` under uvicorn (FastAPI: pydantic models that are the
OpenAPI docs, dependencies for authentication, async routes over a bounded thread pool)."""

from __future__ import annotations

import copy
import dataclasses
import logging
import logging.config
import os
import signal
import socket
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from ragloom.settings import Settings, env_name

log = logging.getLogger(__name__)
CRASH_LOOP_SECONDS = 30.0  # a process that exits this soon after its start is not restarted: the service stops


def serve(settings: Settings | None = None, host: str | None = None, port: int | None = None) -> None:
    """Run the service in the foreground until interrupted. With ``service_processes`` > 1, that many uvicorn
    processes, each on its own socket (``serve_processes``), each building its app from the environment
    (``create_app()``): the GIL holds one process's Python work to one core, and a graph_rag query is mostly Python
    and numpy between store calls."""
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
        if hasattr(socket, "SO_REUSEPORT"):
            logging.config.dictConfig(log_config())  # this process's own lines (it supervises) beside uvicorn's
            serve_processes(settings.service_host, settings.service_port, settings.service_processes,
                            pin=settings.service_pin_cpus)
            return
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


def pin_plan(processes: int, mode: str, usable: Collection[int]) -> list[int | None]:
    """The CPU each of ``processes`` service processes keeps to (None: any), for RAGLOOM_SERVICE_PIN_CPUS ``mode``
    and the CPUs this process may use. ``auto`` pins only when there is one process per usable CPU: the service
    then holds the machine, and a process that stays on one core keeps its caches warm and is not moved between
    cores by the scheduler (a graph_rag query through the service cost the server ~1.5 CPU ms less and Weaviate
    ~0.9: docs/experiments/2026-11-28-service-pinned-processes.md). ``on`` deals the usable CPUs out in turn."""
    cpus = sorted(usable)
    if mode == "off" or not cpus or (mode == "auto" and processes != len(cpus)):
        return [None] * processes
    return [cpus[i % len(cpus)] for i in range(processes)]


def serve_processes(host: str, port: int, processes: int, crash_loop_seconds: float = CRASH_LOOP_SECONDS, *,
                    pin: str) -> None:
    """``processes`` uvicorn processes, each listening on its own socket bound to the one address with
    SO_REUSEPORT, so the kernel spreads new connections over them. uvicorn's ``workers`` share one socket, and the
    process a burst of connections woke accepted all of them: 16 keep-alive clients could all stay on one process
    while the other idled (record ``docs/experiments/2026-11-27-service-reuseport.md``).

    This process supervises: a worker that exits is started again, unless it exits within ``crash_loop_seconds``
    of its start (a bad setting would only loop), and then the service stops with an error. SIGTERM or SIGINT
    stops every worker (uvicorn's graceful shutdown), SIGKILL after 30 s. ``pin``: RAGLOOM_SERVICE_PIN_CPUS
    (``pin_plan``); a worker started again keeps its CPU."""
    import multiprocessing

    try:
        if port:  # without SO_REUSEPORT this bind fails while any process listens there, a ragloom serve included
            _socket(host, port, reuse_port=False).close()
        held = _socket(host, port, reuse_port=True)  # bound, never listening: keeps the port (and names it, for 0)
    except OSError as e:
        raise SystemExit(f"ragloom serve: cannot listen on {host}:{port}: {e}") from e
    port = held.getsockname()[1]
    os.environ[env_name("service_port")] = str(port)
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no parent threads or sockets carried over
    stopping: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        stopping.append(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}

    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    cpus = pin_plan(processes, pin, usable)

    def start(i: int) -> tuple[Any, float]:
        worker = context.Process(target=_serve_one, args=(host, port, cpus[i]), name="ragloom-serve")
        worker.start()
        return worker, time.monotonic()

    workers = [start(i) for i in range(processes)]
    log.info("ragloom service: %d processes on %s:%d, each with its own socket (SO_REUSEPORT)%s", processes, host,
             port, f", each kept to one CPU: {cpus}" if cpus[0] is not None else "")
    failed = None
    try:
        while not stopping and failed is None:
            for i, (worker, started) in enumerate(workers):
                if worker.is_alive():
                    continue
                if time.monotonic() - started < crash_loop_seconds:
                    failed = f"a service process exited {time.monotonic() - started:.0f} s after its start " \
                             f"(exit code {worker.exitcode}): see its log above"
                    break
                log.warning("service process %d exited (code %s): starting another", worker.pid, worker.exitcode)
                workers[i] = start(i)
            time.sleep(0.2)
    finally:
        for worker, _ in workers:
            if worker.is_alive():
                worker.terminate()
        for worker, _ in workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.kill()
                worker.join()
        held.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failed:
        raise SystemExit(f"ragloom serve: {failed}")


def _keep_to(cpu: int) -> None:
    """Every thread of this process on ``cpu``: the ones running now (the interpreter's, any a library started at
    import), and through them every thread started later, which inherits its starter's CPUs."""
    tasks = Path("/proc/self/task")
    for tid in sorted(int(t.name) for t in tasks.iterdir()) if tasks.is_dir() else [0]:
        try:
            os.sched_setaffinity(tid, {cpu})
        except ProcessLookupError:  # a thread that ended since the listing
            continue


def _socket(host: str, port: int, reuse_port: bool) -> socket.socket:
    """A TCP socket bound to the address (SO_REUSEADDR, as uvicorn binds), in SO_REUSEPORT's group or not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock


def _serve_one(host: str, port: int, cpu: int | None = None) -> None:
    """One service process (spawned by ``serve_processes``): its app from the environment, on its own socket, kept
    to ``cpu`` when one is given."""
    import uvicorn

    if cpu is not None:
        _keep_to(cpu)
    sock = _socket(host, port, reuse_port=True)
    config = uvicorn.Config("ragloom.service.app:create_app", factory=True, host=host, port=port, log_level="info",
                            proxy_headers=False, log_config=log_config())
    uvicorn.Server(config).run(sockets=[sock])
