"""Start, find and stop a long-running server process that we own, tracked by a pid file."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ragloom.errors import StackError


def default_interrupts() -> None:
    """Undo an inherited "ignore SIGINT", what a shell gives a background job (a CI step, ``cmd &``).

    SIG_IGN passes through exec to every process we start, and Dagster points SIGTERM at whatever SIGINT does:
    a code server or webserver started that way ignores SIGTERM too, and stopping it waits out the SIGKILL
    deadline (60 s for the cluster's code server). A handler, unlike SIG_IGN, is reset to the default on exec,
    so with Python's own handler here the children start with the default. Call it where a process starts
    (the CLI, the test session); in any thread but the main one it does nothing."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def http_ok(url: str) -> bool:
    """Whether ``url`` answers 200 within two seconds."""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def wait_until(check: Callable[[], bool], timeout: float, what: str, log_file: Path | None = None,
               alive: Callable[[], bool] | None = None) -> float:
    """Poll ``check`` until true; returns seconds waited. Fails early if the process died."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        if alive is not None and not alive():
            raise StackError(f"{what} exited during start-up.{_tail_hint(log_file)}")
        time.sleep(0.25)
    raise StackError(f"{what} was not ready after {timeout:.0f}s (raise RAGLOOM_STACK_TIMEOUT_SECONDS on slow "
                     f"machines).{_tail_hint(log_file)}")


def _tail_hint(log_file: Path | None, lines: int = 15) -> str:
    if log_file is None or not log_file.exists():
        return ""
    tail = log_file.read_text(errors="replace").splitlines()[-lines:]
    return f" Last lines of {log_file}:\n  " + "\n  ".join(tail)


@dataclass
class ManagedProcess:
    """A server started in its own session so it outlives the command that started it."""

    name: str
    pid_file: Path
    log_file: Path

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def running(self) -> bool:
        return self.pid() is not None

    def start(self, argv: list[str], env: dict[str, str], cwd: Path) -> int:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid_file.write_text(str(proc.pid))
        return proc.pid

    def up(self, ready: Callable[[], bool], ports: tuple[int, ...], server: str, settings_names: str) -> bool:
        """Whether this server runs and is ready. When it is not running, a listener on one of its ports is
        another program: that is an error naming the settings that move ours (a server that cannot bind would
        only time out)."""
        if self.running():
            return ready()
        for port in ports:
            if port_open("127.0.0.1", port):
                raise StackError(f"port {port} is in use by another program: stop it, or move ragloom's {server} "
                                 f"with {settings_names}")
        return False

    def wait_ready(self, ready: Callable[[], bool], timeout: float, what: str) -> float:
        """``wait_until`` ready, failing early (with the log's tail) if this process dies meanwhile."""
        return wait_until(ready, timeout, what, self.log_file, alive=self.running)

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM, then SIGKILL after ``timeout``. Returns whether a process was stopped."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.2)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.1)
        self.pid_file.unlink(missing_ok=True)
        return True

    def kill(self) -> None:
        """SIGKILL without a clean shutdown: for fault-injection tests."""
        pid = self.pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as dead once its last thread is gone. A killed multi-threaded server's main
    # thread turns zombie first, while its other threads are still exiting and still hold its listening sockets:
    # a restart in that moment found the ports taken (Weaviate, after 6 of 8 SIGKILLs on 2026-11-28).
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(") ", 1)[1][:1] != "Z":
                return True
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except FileNotFoundError:
        return False  # reaped meanwhile
    except OSError:
        return True
