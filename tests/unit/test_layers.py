"""The import contracts in pyproject.toml hold (import-linter), can fail, and cover every core module; the
declared dependencies are the imported ones (deptry)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("ragloom", "assets", "resources", "pipelines")


def _tool(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    return str(path) if path.exists() else name


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([_tool("lint-imports"), "--no-cache"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)


def _contracts() -> list[dict]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def _core_modules() -> set[str]:
    return {p.stem if p.is_file() else p.name for p in (REPO / "ragloom").iterdir()
            if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}


def test_the_contracts_hold():
    out = _lint(REPO)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


def test_an_upward_import_breaks_the_layers(tmp_path):
    for package in PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    types = tmp_path / "ragloom" / "types.py"
    types.write_text(types.read_text() + "\n\ndef _planted() -> object:\n    from ragloom import api\n\n"
                     "    return api\n")
    out = _lint(tmp_path)
    assert out.returncode != 0
    assert "ragloom's layers BROKEN" in out.stdout and "ragloom.types -> ragloom.api" in out.stdout


def test_every_core_module_is_in_a_layer_and_under_the_driver_rule():
    contracts = {c["name"]: c for c in _contracts()}
    layered = {name.strip() for layer in contracts["ragloom's layers"]["layers"] for name in layer.split("|")}
    assert _core_modules() == layered, f"not in a layer: {sorted(_core_modules() - layered)}"
    drivers = contracts["only stores/ talks to the store drivers"]
    sources = {m.removeprefix("ragloom.") for m in drivers["source_modules"] if m.startswith("ragloom.")}
    assert sources == _core_modules() - {"stores"}, f"missing: {sorted(_core_modules() - {'stores'} - sources)}"
    assert not any("ignore_imports" in c for c in contracts.values())


@pytest.mark.parametrize("module", ["ragloom.types", "ragloom.settings"])
def test_the_foundation_imports_without_the_chunkers(module):
    """Settings no longer import the chunker registry: an embedder can be built without the chunking
    dependency (semantic_text_splitter)."""
    code = (f"import sys; import {module}; from ragloom.settings import Settings; Settings.from_env(); "
            "bad = [m for m in sys.modules if m.startswith(('ragloom.chunking', 'semantic_text_splitter'))]; "
            "assert not bad, bad")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr


def test_declared_dependencies_are_the_imported_ones():
    out = subprocess.run([_tool("deptry"), ".", "--no-ansi"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_function_level_import_says_why():
    """Imports inside functions hide cycles; one stays only to defer a heavy dependency, and says so."""
    silent = []
    for path in sorted((REPO / "ragloom").rglob("*.py")):
        lines = path.read_text().splitlines()
        in_type_checking = False
        for number, line in enumerate(lines, 1):
            if line.startswith("if TYPE_CHECKING"):
                in_type_checking = True
                continue
            if in_type_checking and (not line.strip() or line.startswith(" ")):
                continue
            in_type_checking = False
            stripped = line.strip()
            if line.startswith(" ") and stripped.startswith(("from ragloom", "import ragloom")):
                said = "# deferred:" in line or lines[number - 2].strip().startswith("# deferred:")
                if not said:
                    silent.append(f"{path.relative_to(REPO)}:{number}: {stripped}")
    assert not silent, "function-level imports without a '# deferred: why' comment:\n" + "\n".join(silent)
