"""The answer cache: SQLite under the data directory, keyed by everything that shapes an answer.

The key hashes the model, the prompt templates' keys (name, version, text hash), the generation parameters,
the question and the context passages' chunk ids and content hashes, in context order. A re-ingest that
changes a passage changes its id and hash, so it misses by construction; nothing needs invalidating.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragloom.errors import ConfigError
from ragloom.types import sha256_hex

SCHEMA_VERSION = 1


def cache_key(model: str, params: Mapping[str, Any], question: str, passages: Sequence[tuple[str, str]],
              **extra: Any) -> str:
    """sha256 of a canonical JSON of the inputs; ``passages``: (chunk id, content hash) in context order."""
    payload = {"v": SCHEMA_VERSION, "model": model, "params": dict(params), "question": question.strip(),
               "passages": [list(p) for p in passages], **extra}
    return sha256_hex(json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str))


class AnswerCache:
    """Thread-safe; one connection per cache object. ``path`` ``:memory:`` keeps it in memory."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=10)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, created REAL NOT NULL, "
                             "answer TEXT NOT NULL)")
            self._db.commit()
        except sqlite3.Error as e:
            raise ConfigError(f"the answer cache {path} cannot be opened: {e}") from e
        self._lock = threading.Lock()

    @classmethod
    def for_settings(cls, settings: Any) -> AnswerCache:
        return cls(settings.data_dir / "llm" / "answer_cache.sqlite3")

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT answer FROM answers WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, answer: Mapping[str, Any]) -> None:
        text = json.dumps(answer, default=str)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO answers (key, created, answer) VALUES (?, ?, ?)",
                             (key, time.time(), text))
            self._db.commit()

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def clear(self) -> int:
        with self._lock:
            n = self._db.execute("DELETE FROM answers").rowcount
            self._db.commit()
        return int(n)

    def close(self) -> None:
        with self._lock:
            self._db.close()
