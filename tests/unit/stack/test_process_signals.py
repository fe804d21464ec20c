"""A process started as a shell's background job (SIGINT ignored) must still start servers that stop on SIGTERM.
Dagster points SIGTERM at whatever SIGINT does, and SIG_IGN passes through exec: without
``default_interrupts`` the cluster's code server outlived SIGTERM until the 60 s SIGKILL."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from ragloom.settings import REPO_ROOT

# what a Dagster server does at start: SIGTERM does what SIGINT does
SERVER = ("import signal, time; signal.signal(signal.SIGTERM, signal.getsignal(signal.SIGINT)); "
          "print('up', flush=True); time.sleep(60)")

PARENT = textwrap.dedent("""
    import signal, subprocess, sys
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell starts a background job
    if sys.argv[1] == "default_interrupts":
        from ragloom.stack.process import default_interrupts
        default_interrupts()
    server = subprocess.Popen([sys.executable, "-c", sys.argv[2]], stdout=subprocess.PIPE, text=True)
    server.stdout.readline()
    server.terminate()
    try:
        server.wait(timeout=5)
        print("stopped on SIGTERM")
    except subprocess.TimeoutExpired:
        server.kill()
        print("ignored SIGTERM")
""")


@pytest.mark.parametrize("setup,outcome", [("default_interrupts", "stopped on SIGTERM"),
                                           ("nothing", "ignored SIGTERM")])
def test_servers_started_from_a_background_job_stop_on_sigterm(setup, outcome):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", PARENT, setup, SERVER], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == outcome
