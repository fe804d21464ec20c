"""Checks on paths that come in through Launchpad config."""

from collections.abc import Iterable
from pathlib import Path


def inside(path: Path, roots: Iterable[Path]) -> bool:
    """Whether ``path``, with links and '..' resolved, lies under one of ``roots``: run config must not turn
    any file the process can read into input."""
    real = path.resolve()
    return any(real.is_relative_to(Path(root).resolve()) for root in roots)
