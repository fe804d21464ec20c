"""A killed server is dead only when its last thread is: until then its sockets are open, and a restart on the
same ports would find them taken. The process's main thread can be a zombie before that (SIGKILL ends the
threads one by one; here the main thread simply ends first, while another thread holds a listening socket)."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ragloom.stack.process import ManagedProcess, port_open

SYS_EXIT = {"x86_64": 60, "aarch64": 93}  # exit(2): ends the calling thread only (exit_group ends them all)

SERVER = textwrap.dedent("""
    import ctypes, socket, sys, threading, time
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    threading.Thread(target=time.sleep, args=(60,)).start()  # outlives the main thread, the socket still open
    print(sock.getsockname()[1], flush=True)
    ctypes.CDLL(None).syscall(int(sys.argv[1]), 0)
""")


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1]


@pytest.mark.skipif(platform.machine() not in SYS_EXIT, reason="the thread-only exit call is per architecture")
def test_a_process_whose_main_thread_is_a_zombie_is_alive_until_its_last_thread_ends(tmp_path):
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(SYS_EXIT[platform.machine()])],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        deadline = time.monotonic() + 10
        while _state(server.pid) != "Z":
            assert time.monotonic() < deadline, "the main thread did not end"
            time.sleep(0.01)
        (tmp_path / "server.pid").write_text(str(server.pid))
        managed = ManagedProcess("server", tmp_path / "server.pid", tmp_path / "server.log")

        assert port_open("127.0.0.1", port)  # its other thread still serves
        assert managed.running()

        managed.kill()  # returns once every thread has ended

        assert not managed.running()
        assert not port_open("127.0.0.1", port)
    finally:
        server.kill()
        server.wait(timeout=10)
