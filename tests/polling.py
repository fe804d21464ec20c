"""Helpers for tests that start servers or need one missing: a free loopback port, and polling with a deadline."""

from __future__ import annotations

import socket
import time


def free_port() -> int:
    """A loopback port nobody listens on right now (bound, then released): for a server to start on, or for a
    connection that must be refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, what: str, interval: float = 1.0):
    """``predicate()``'s first truthy value, polled every ``interval`` s; AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
