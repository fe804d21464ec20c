"""Helpers for tests that start servers or need one missing: a free loopback port, and polling with a deadline."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Ports handed to servers that bind them later: above the fixed ports of the local stack and the cluster profile
# (all below 20000), and below the kernel's ephemeral range. A port from that range can be taken by any outgoing
# connection before the server binds it: a private Neo4j, ~13 s into its start, found its Bolt port held by one
# while the other half of the suite ran beside it ("Address already in use").
SERVER_PORTS_FROM = 20_000
# The first 2,000 of them are kept for servers a test kills and starts again on the same ports (the reliability
# suite's private stack). While such a server is down its ports are free, and the suite's other lane, starting
# servers of its own beside it, could otherwise be handed one of them and hold it when the restart comes.
RESTARTED_PORTS_TO = 22_000


def _ephemeral_start() -> int:
    """The first port the kernel gives outgoing connections (Linux: net.ipv4.ip_local_port_range)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def free_port_block(size: int, restarted: bool = False) -> int:
    """A base port such that base .. base+size-1 are free on loopback right now and outside the ephemeral range:
    for servers to start on, or for a connection that must be refused. ``restarted``: for servers that will be
    killed and started again on the same ports, from a range no other caller is handed."""
    start, end = ((SERVER_PORTS_FROM, RESTARTED_PORTS_TO) if restarted
                  else (RESTARTED_PORTS_TO, max(_ephemeral_start(), RESTARTED_PORTS_TO + 1_000)))
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(start, end - size)
        if all(_port_free(base + i) for i in range(size)):
            return base
    raise RuntimeError(f"no block of {size} free ports found between {start} and {end}")


def free_port() -> int:
    """A loopback port nobody listens on right now (``free_port_block``)."""
    return free_port_block(1)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    with socket.socket() as s:  # nothing listening on the wildcard address either
        return s.connect_ex(("127.0.0.1", port)) != 0


def tcp_sockets(port: int, state: str = "0A") -> list[tuple[str, str]]:
    """(local address as /proc writes it, socket inode) of the TCP sockets, IPv4 and IPv6, whose local port is
    ``port`` and whose state is ``state`` (proc(5): 0A listening, 01 established). Linux only."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                address, hex_port = fields[1].split(":")
                if fields[3] == state and int(hex_port, 16) == port:
                    found.append((address, fields[9]))
    return found


def wait_for(predicate, timeout: float, what: str, interval: float = 1.0):
    """``predicate()``'s first truthy value, polled every ``interval`` s; AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@contextmanager
def ragloom_serve(env: dict[str, str], port: int, log: Path, cwd: Path, timeout: float = 180) -> Iterator[str]:
    """``ragloom serve`` on ``port`` as a real process with ``env``, its output in ``log``: yields its URL once
    /readyz answers 200, and stops it afterwards (SIGTERM, then SIGKILL after 30 s)."""
    import httpx

    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ragloom", "serve", "--port", str(port)], cwd=cwd, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, timeout, "ragloom serve to be ready", interval=0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
