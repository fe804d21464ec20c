"""API keys of the query service: each maps to a principal (tenant, optional user, optional admin).

A key is ``rlk_<key id>_<secret>``. The keys file (``Settings.resolved_keys_file``, mode 0600) stores the
key id, the principal and the SHA-256 of the whole key, never the key itself: a key is shown once, by
``ragloom keys create``. SHA-256 rather than a slow password hash because keys are 256-bit random
strings (nothing to brute-force) and every request checks one. The service re-reads the file when it
changes, so ``ragloom keys revoke`` takes effect without a restart.
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ragloom import files
from ragloom.errors import ConfigError, ForbiddenError, ScopeError
from ragloom.types import Scope, sha256_hex

KEY_PREFIX = "rlk_"


def check_principal(tenant: str, user: str = "", admin: bool = False) -> None:
    """Who a key may speak for. ``user`` empty: the whole tenant (an application acting for its users).

    Admin keys are tenant-wide: an admin promotes documents into its tenant's common space (or __shared__), an act
    on behalf of the whole tenant, so only a key that already speaks for the whole tenant may hold it. A user-level
    admin would either add nothing or reach sideways into other users' private documents (issue #28)."""
    if not tenant:
        raise ConfigError("a key needs a tenant")
    Scope(tenant, user)  # same part rules as every scope (no '/', not __shared__)
    if admin and user:
        raise ConfigError("admin keys are tenant-wide: create the admin key without a user")


@dataclass(frozen=True)
class KeyRecord:
    """A stored key (its id and hash, never the key) and its principal; the service's caller is the record of the
    key that authenticated the request."""

    key_id: str
    tenant: str
    user: str
    admin: bool
    created_at: float
    key_sha256: str
    revoked_at: float | None = None
    label: str = ""


    @property
    def scope(self) -> Scope:
        """The key's principal as a scope: its tenant, or the tenant's user."""
        return Scope(self.tenant, self.user)

    def narrow(self, requested: str | None) -> Scope:
        """The requested scope if it lies within this key's own; None or '' means the key's own. A malformed
        path is a ScopeError (400), one outside the key's scope a ForbiddenError (403)."""
        if not requested:
            return self.scope
        scope = Scope.from_path(requested)
        if self.scope.path not in scope.visible_paths():
            raise ForbiddenError(f"scope {scope.path!r} is outside this key's scope {self.scope.path!r}")
        return scope

    def owns(self, scope_path: str) -> bool:
        """Whether a stored scope path lies within this key's subtree."""
        try:
            return self.scope.path in Scope.from_path(scope_path).visible_paths()
        except ScopeError:
            return False

    def public(self) -> dict:
        """What `keys list` shows: everything but the hash."""
        out = asdict(self)
        out.pop("key_sha256")
        return out


class KeyStore:
    """The keys file. Writes go through a temporary file and a rename, so a reader never sees half a file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._records: dict[str, KeyRecord] = {}
        self._stamp: tuple[int, int] | None = None

    # reading ---------------------------------------------------------------------------------------
    def _load(self) -> dict[str, KeyRecord]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._records, self._stamp = {}, None
            return self._records
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            try:
                raw = json.loads(self.path.read_text())
                self._records = {r["key_id"]: KeyRecord(**r) for r in raw.get("keys", [])}
            except (OSError, ValueError, TypeError, KeyError) as e:
                raise ConfigError(f"keys file {self.path} is unreadable: {e}") from e
            self._stamp = stamp
        return self._records

    def records(self) -> list[KeyRecord]:
        with self._lock:
            return sorted(self._load().values(), key=lambda r: r.created_at)

    def lookup(self, key: str | None) -> KeyRecord | None:
        """The record of a valid, unrevoked key; None otherwise (never says which part was wrong)."""
        if not key or not key.startswith(KEY_PREFIX) or len(key) > 200:
            return None
        key_id = key[len(KEY_PREFIX):].split("_", 1)[0]
        with self._lock:
            record = self._load().get(key_id)
        if record is None or record.revoked_at is not None:
            return None
        if not hmac.compare_digest(record.key_sha256, sha256_hex(key)):
            return None
        return record

    # writing ---------------------------------------------------------------------------------------
    def _save(self, records: dict[str, KeyRecord]) -> None:
        files.write_text(self.path, json.dumps({"keys": [asdict(r) for r in records.values()]}, indent=1), mode=0o600)
        self._stamp = None

    def create(self, tenant: str, user: str = "", admin: bool = False, label: str = "") -> tuple[str, KeyRecord]:
        """A new key and its record. The key is returned here and nowhere else."""
        check_principal(tenant, user, admin)
        key_id = secrets.token_hex(6)
        key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        record = KeyRecord(key_id=key_id, tenant=tenant, user=user, admin=admin, created_at=time.time(),
                           key_sha256=sha256_hex(key), label=label)
        with self._lock:
            records = dict(self._load())
            records[key_id] = record
            self._save(records)
        return key, record

    def revoke(self, key_id: str) -> KeyRecord:
        with self._lock:
            records = dict(self._load())
            if key_id not in records:
                raise ConfigError(f"no key with id {key_id!r} in {self.path}")
            record = records[key_id]
            if record.revoked_at is None:
                record = KeyRecord(**{**asdict(record), "revoked_at": time.time()})
                records[key_id] = record
                self._save(records)
        return record
