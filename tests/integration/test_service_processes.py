"""`ragloom serve --processes N`: N real uvicorn processes, each on its own SO_REUSEPORT socket, supervised.

uvicorn's own workers share one socket, and the worker a burst of connections woke accepted all of them: with
keep-alive clients, every connection could stay on one process while the other idled (record
docs/experiments/2026-11-27-service-reuseport.md). Here the kernel spreads connections over the processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from polling import free_port, tcp_sockets, wait_for

from ragloom.settings import REPO_ROOT

CONNECTIONS = 32
AT_LEAST = 6  # of 32 per process: two sockets hashed evenly miss this with probability ~5e-5


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _sockets(port: int, state: str) -> set[str]:
    """The sockets (as /proc/<pid>/fd links name them) on ``port`` in ``state`` (0A listen, 01 established)."""
    return {f"socket:[{inode}]" for _, inode in tcp_sockets(port, state)}


def _held_by(pid: int, inodes: set[str]) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += os.readlink(fd) in inodes
        except OSError:
            continue
    return count


def _listening_twice(port: int, server: subprocess.Popen) -> set[str]:
    """The port's two listening sockets, once both processes listen: a process logs that it is ready at the end of
    its app's startup, and uvicorn starts listening just after."""
    def two() -> set[str] | None:
        listening = _sockets(port, "0A")
        return listening if len(listening) == 2 else None

    try:
        return wait_for(two, 30, "two listening sockets", interval=0.2)
    except AssertionError:
        raise AssertionError(f"listening sockets on {port}: {_sockets(port, '0A')}, processes "
                             f"{_children(server.pid)}") from None


def _env(tmp_path: Path) -> dict[str, str]:
    prefix = f"Procs{uuid.uuid4().hex[:8]}"
    return {**os.environ, "RAGLOOM_COLLECTION_PREFIX": prefix, "RAGLOOM_GRAPH_NAMESPACE": prefix.lower(),
            "RAGLOOM_SERVICE_KEYS_FILE": str(tmp_path / "keys.json")}


def _cpus_of_threads(pid: int) -> set[str]:
    """The CPU lists the process's threads may run on (/proc's Cpus_allowed_list), one entry per distinct list."""
    lists = set()
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:  # a thread that ended since the listing
            continue
        lists |= {line.split(":", 1)[1].strip() for line in lines if line.startswith("Cpus_allowed_list:")}
    return lists


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; SO_REUSEPORT balancing is Linux's")
def test_two_processes_share_the_connections_and_stop_together(tmp_path):
    """Pinned (RAGLOOM_SERVICE_PIN_CPUS=on): each process, every thread of it, keeps to a CPU of its own."""
    port, log = free_port(), tmp_path / "serve.log"
    usable = sorted(os.sched_getaffinity(0))
    with open(log, "w") as out:
        server = subprocess.Popen([sys.executable, "-m", "ragloom", "serve", "--port", str(port), "--processes", "2"],
                                  cwd=REPO_ROOT, env={**_env(tmp_path), "RAGLOOM_SERVICE_PIN_CPUS": "on"},
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def both_ready() -> bool:
        assert server.poll() is None, log.read_text()[-3000:]
        return log.read_text().count("ragloom service ready") == 2

    try:
        wait_for(both_ready, 180, "both service processes to be ready", interval=0.5)
        listening = _listening_twice(port, server)  # one listening socket per process, not one shared by both
        workers = [pid for pid in _children(server.pid) if _held_by(pid, listening)]  # (not the resource tracker)
        assert len(workers) == 2, (listening, workers)
        assert all(_held_by(pid, listening) == 1 for pid in workers)
        # the app's threads (its worker pools, the query embedder's) started after the pin and inherited it
        pinned = sorted(" | ".join(sorted(_cpus_of_threads(pid))) for pid in workers)
        assert pinned == sorted([str(usable[0]), str(usable[1 % len(usable)])]), (pinned, usable)
        assert "each kept to one CPU" in log.read_text()
        # a burst: every handshake completes in the kernel before a process accepts, as 16 clients opening their
        # keep-alive connections at once do
        burst = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(CONNECTIONS)]
        try:
            for conn in burst:
                conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert all(conn.recv(64).startswith(b"HTTP/1.1 200") for conn in burst)
            open_now = _sockets(port, "01")
            held = {pid: _held_by(pid, open_now) for pid in workers}
        finally:
            for conn in burst:
                conn.close()
        serving = sorted((n for n in held.values() if n), reverse=True)
        assert sum(serving) == CONNECTIONS and len(serving) == 2 and serving[-1] >= AT_LEAST, held
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0, log.read_text()[-3000:]
        wait_for(lambda: not any(Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) for pid in workers),
                 30, "the service processes to exit with their supervisor", interval=0.2)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_a_taken_port_or_a_process_that_dies_at_start_stops_the_service_with_the_reason(tmp_path, monkeypatch):
    """A port another server listens on is refused before any process starts; a process whose app cannot be
    built (a bad setting, read from the environment in the process) stops the service instead of restarting in
    a loop."""
    from ragloom.service import serve_processes

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(SystemExit, match=r"cannot listen on 127\.0\.0\.1:\d+"):
            serve_processes("127.0.0.1", taken.getsockname()[1], 2, pin="off")
    for name, value in _env(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RAGLOOM_SERVICE_WORKERS", "0")  # refused by Settings: the app factory fails in the process
    with pytest.raises(SystemExit, match="a service process exited .* after its start"):
        serve_processes("127.0.0.1", free_port(), 2, pin="off")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_process_killed_after_its_start_is_replaced_on_its_own_socket(tmp_path):
    """A worker that dies once it has been serving (the kernel's OOM killer, a segfault in a native library) is
    started again, and the port goes on answering from two processes."""
    port, log = free_port(), tmp_path / "serve.log"
    code = ("import logging.config; from ragloom import service; logging.config.dictConfig(service.log_config()); "
            f"service.serve_processes('127.0.0.1', {port}, 2, crash_loop_seconds=1, pin='off')")
    with open(log, "w") as out:
        server = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, env=_env(tmp_path), stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)

    def ready(count: int):
        def check() -> bool:
            assert server.poll() is None, log.read_text()[-3000:]
            return log.read_text().count("ragloom service ready") >= count
        return check

    try:
        wait_for(ready(2), 180, "both service processes to be ready", interval=0.5)
        listening = _listening_twice(port, server)
        [victim, survivor] = [pid for pid in _children(server.pid) if _held_by(pid, listening)]
        os.kill(victim, signal.SIGKILL)
        wait_for(ready(3), 180, "a third process to be ready", interval=0.5)
        assert f"service process {victim} exited (code -9): starting another" in log.read_text()
        listening = _listening_twice(port, server)
        workers = [pid for pid in _children(server.pid) if _held_by(pid, listening)]
        assert survivor in workers and victim not in workers and len(workers) == 2
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
