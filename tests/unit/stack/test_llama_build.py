"""The llama-server build recipe: no AMX on x86 (llama.cpp's AMX matrix multiply segfaulted on a Sapphire Rapids
machine; see ragloom.stack.llama.NO_AMX)."""

from __future__ import annotations

import platform
import shutil
import subprocess

from ragloom.settings import Settings
from ragloom.stack import llama


def test_the_build_turns_amx_off_on_x86_only():
    x86 = llama.cmake_flags("x86_64")
    assert f"-DCMAKE_C_FLAGS={llama.NO_AMX}" in x86 and f"-DCMAKE_CXX_FLAGS={llama.NO_AMX}" in x86
    assert llama.cmake_flags("aarch64") == llama.CMAKE_FLAGS  # an ARM compiler knows no -mno-amx-*


def test_the_no_amx_flags_win_over_an_amx_cpus_march_in_the_compiler():
    """The recipe relies on the compiler letting -mno-amx-* win over what -march turns on: asked of this
    machine's compiler for a CPU that has AMX (llama.cpp's build passes -march=native after CMAKE_C_FLAGS)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    assert compiler, "no C compiler: llama-server cannot be built here either"
    if platform.machine().lower() not in ("x86_64", "amd64"):
        assert llama.NO_AMX not in " ".join(llama.cmake_flags())
        return

    def defines(*flags: str) -> str:
        return subprocess.run([compiler, *flags, "-dM", "-E", "-"], input="", capture_output=True, text=True,
                              check=True).stdout

    assert "__AMX_INT8__" in defines("-march=sapphirerapids")
    without = defines(*llama.NO_AMX.split(), "-march=sapphirerapids")
    assert "__AMX_INT8__" not in without and "__AMX_TILE__" not in without
    assert "__AVX512VNNI__" in without  # the rest of what the CPU offers stays on


def test_a_build_from_an_older_recipe_is_not_reused(tmp_path):
    settings = Settings(cache_dir=tmp_path)
    assert llama.binary_path(settings).parent.parent.name == f"build-{settings.llama_cpp_version}-noamx"
