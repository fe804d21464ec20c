"""Detect new, changed and deleted upload files against a cursor of (path, content hash).

Files are re-hashed only when their size or mtime moved, so a tick over a large, quiet folder
costs one stat per file. The sensor stores `UploadState.to_cursor()` as its cursor.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ragloom.parsing import is_sidecar


@dataclass(frozen=True)
class FileState:
    size: int
    mtime_ns: int
    sha256: str


@dataclass
class UploadChanges:
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.deleted)

    def run_key(self, state: dict[str, FileState]) -> str:
        """Same file versions -> same key: each version of a file is indexed exactly once."""
        parts = [f"+{p}:{state[p].sha256}" for p in sorted(self.added + self.changed)]
        parts += [f"-{p}" for p in sorted(self.deleted)]
        return "uploads-" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def scan(root: Path, previous: dict[str, FileState]) -> dict[str, FileState]:
    """Current state of every visible file under ``root`` (sidecars count: they change a document's scope)."""
    state: dict[str, FileState] = {}
    if not root.exists():
        return state
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            path = Path(dirpath) / name
            try:
                st = path.stat()
            except OSError:
                continue  # vanished between listing and stat: the next tick sees it deleted
            rel = path.relative_to(root).as_posix()
            old = previous.get(rel)
            if old is not None and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns:
                state[rel] = old
                continue
            try:
                state[rel] = FileState(st.st_size, st.st_mtime_ns, _sha256_file(path))
            except OSError:
                continue
    return state


def diff(previous: dict[str, FileState], current: dict[str, FileState]) -> UploadChanges:
    changes = UploadChanges()
    for rel, st in current.items():
        old = previous.get(rel)
        if old is None:
            changes.added.append(rel)
        elif old.sha256 != st.sha256:
            changes.changed.append(rel)
    changes.deleted = sorted(set(previous) - set(current))
    return changes


def documents_touched(changes: UploadChanges) -> list[str]:
    """Upload paths of documents (not sidecars) that the changes affect."""
    return sorted(p for p in changes.added + changes.changed + changes.deleted if not is_sidecar(p))


def to_cursor(state: dict[str, FileState]) -> str:
    return json.dumps({p: [s.size, s.mtime_ns, s.sha256] for p, s in state.items()}, separators=(",", ":"))


def from_cursor(cursor: str | None) -> dict[str, FileState]:
    if not cursor:
        return {}
    return {p: FileState(*v) for p, v in json.loads(cursor).items()}
