"""Atomic file replacement: a reader sees the old file or the whole new one, never half of it, and concurrent
writers of one path (two runs, two service workers) never share a temporary file."""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: Path, mode: int | None = None) -> Iterator[Path]:
    """Yields a temporary path beside ``path`` (unique to this writer) to write; on success it replaces ``path``
    in one step, on an exception it is removed. ``mode``: the new file's permissions (e.g. 0o600 for secrets),
    set before anything is written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        if mode is not None:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    with replacing(path, mode) as tmp:
        tmp.write_bytes(data)


def write_text(path: Path, text: str, mode: int | None = None) -> None:
    write_bytes(path, text.encode("utf-8"), mode)


def write_private(path: Path, text: str) -> None:
    """``write_text`` readable by the owner only (mode 0600 from the start): passwords, keys, files naming them."""
    write_text(path, text, mode=0o600)
