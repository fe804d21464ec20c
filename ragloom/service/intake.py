"""Documents uploaded through the service: written into the caller's folder under the uploads folder (the
uploads sensor indexes them), with a record that lets ``status`` say queued / indexed / rejected.

Layout: ``<uploads>/<tenant>[/<user>[/<chat>]]/<upload id>-<name>`` (the folders are the scope, as the sensor
reads it), a sidecar next to it for the title, the namespace and an agent scope, and the record in
``<uploads>/.service/<upload id>.json`` (hidden folders are not scanned). The sidecar is written first and the
file appears by an atomic rename, so the sensor never sees half a file or a file without its sidecar.
Uploads are private documents: files 0600 and the folders this creates 0700 (like the keys file), whatever the
process umask.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from ragloom import files
from ragloom.errors import ConfigError
from ragloom.parsing.sources import FORMATS, SIDECAR_SUFFIX
from ragloom.types import Scope

_NAME_JUNK = re.compile(r"[^A-Za-z0-9._-]+")
RECORDS = ".service"
UPLOADS_SOURCE = "uploads"  # the uploads folder's source name: its documents' ids start with it


@dataclass(frozen=True)
class UploadRecord:
    upload_id: str
    document_id: str  # the id ingestion gives it: uploads/<path under the uploads folder>
    path: str  # the file, as ingestion reports a rejection
    scope: str
    created_at: float


def safe_name(filename: str) -> str:
    name = _NAME_JUNK.sub("_", PurePosixPath(filename.replace("\\", "/")).name).strip("._") or "upload"
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in FORMATS:
        raise ConfigError(f"filename {filename[:80]!r}: unsupported type {suffix or '(none)'!r}; "
                          f"supported: {', '.join(sorted(FORMATS))}")
    if name.endswith(SIDECAR_SUFFIX):
        raise ConfigError(f"filename {filename[:80]!r}: sidecar names are reserved")
    return name[-120:]


def save_upload(root: Path, scope: Scope, filename: str, data: bytes, *, title: str = "",
                namespace: str = "") -> UploadRecord:
    """Write the file (and its sidecar) into ``scope``'s folder; the folder holds tenant/user/chat, an agent
    scope goes into the sidecar."""
    if not scope.tenant:
        raise ConfigError("an upload needs a tenant scope")
    name = safe_name(filename)
    upload_id = "up-" + secrets.token_hex(10)
    folder_parts = [p for p in (scope.tenant, scope.user, scope.chat) if p]
    folder = private_folder(root, *folder_parts)
    target = folder / f"{upload_id}-{name}"
    sidecar: dict = {}
    if title:
        sidecar["title"] = title
    if namespace:
        sidecar["metadata"] = {"namespace": namespace}
    if scope.agent:
        sidecar["scope"] = scope.path
    if sidecar:
        files.write_bytes(target.with_name(target.name + SIDECAR_SUFFIX), json.dumps(sidecar).encode(), mode=0o600)
    files.write_bytes(target, data, mode=0o600)
    record = UploadRecord(upload_id, f"{UPLOADS_SOURCE}/{target.relative_to(root).as_posix()}", str(target),
                          scope.path, time.time())
    records = private_folder(root, RECORDS)
    files.write_bytes(records / f"{upload_id}.json", json.dumps(asdict(record)).encode(), mode=0o600)
    return record


def private_folder(root: Path, *parts: str) -> Path:
    """``root/parts...``, each folder this creates made 0700 (mkdir's mode is cut by the umask: chmod after)."""
    folder = root
    for part in ("", *parts):
        folder = folder / part if part else folder
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(0o700)
    return folder


def load_record(root: Path, upload_id: str) -> UploadRecord | None:
    if not re.fullmatch(r"up-[0-9a-f]{20}", upload_id):
        return None
    path = root / RECORDS / f"{upload_id}.json"
    try:
        return UploadRecord(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def rejection(artifacts_dir: Path, path: str) -> str | None:
    """'reason: detail' when the last ingestion rejected the file at ``path``, else None."""
    table = artifacts_dir / "rejected_documents.parquet"
    if not table.exists():
        return None
    import pyarrow.parquet as pq

    for row in pq.read_table(table, columns=["source_path", "reason", "detail"]).to_pylist():
        if row["source_path"] == path:
            return f"{row['reason']}: {row['detail']}" if row["detail"] else str(row["reason"])
    return None
