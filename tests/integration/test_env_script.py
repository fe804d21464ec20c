"""scripts/env.sh, sourced as the README says: it activates the environment, and the strict shell options it
runs under do not outlive it in the caller's shell (an interactive shell must not start exiting on its first
failing command)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

REPORT = """
flags=""
case $- in *e*) flags+=e ;; esac
case $- in *u*) flags+=u ;; esac
if shopt -qo pipefail; then flags+=" pipefail"; fi
echo "options:$flags"
echo "python:$(command -v python)"
"""


@pytest.mark.parametrize(("caller", "expected"), [
    ("", ""),
    ("set -e", "e"),
    ("set -u", "u"),
    ("set -euo pipefail", "eu pipefail"),  # scripts/test's own options stay as they were
])
def test_sourcing_env_keeps_the_callers_shell_options(caller, expected):
    script = f'{caller}\nsource "{REPO}/scripts/env.sh" >/dev/null 2>&1\n{REPORT}'
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(":", 1) for line in done.stdout.splitlines() if ":" in line)
    assert lines["options"] == expected
    assert "/venvs/" in lines["python"]  # the environment is active in the caller's shell


def test_a_failing_command_after_sourcing_does_not_end_the_shell():
    script = f'source "{REPO}/scripts/env.sh" >/dev/null 2>&1\nfalse\necho still here'
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=900)
    assert done.stdout.strip() == "still here", done.stderr
