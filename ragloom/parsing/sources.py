"""Files under a root -> Documents, each bad file, JSONL line or attachment -> a Rejection; one bad source never
stops a batch."""

from __future__ import annotations

import codecs
import json
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ragloom.errors import ParseError, ScopeError
from ragloom.parsing.base import Parsed, ParseLimits
from ragloom.parsing.html import html_to_text
from ragloom.parsing.jsonl import JsonlRecord, read_jsonl
from ragloom.parsing.mail import eml_to_text
from ragloom.parsing.markdown import MARKDOWN_FORMATS, first_title, parse_headings
from ragloom.parsing.pdf import pdf_to_text
from ragloom.parsing.sheets import csv_to_text, xlsx_to_text
from ragloom.parsing.slides import pptx_to_text
from ragloom.parsing.word import docx_to_text
from ragloom.types import Document, Rejection, Scope, sha256_hex

SIDECAR_SUFFIX = ".meta.json"
SIDECAR_MAX_BYTES = 1_000_000
# Macro-enabled Office files (.docm, .pptm, .xlsm) are read as their macro-free kin: the parsers read the XML
# content and never the VBA project, so nothing in the file runs.
FORMATS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".html": "html", ".htm": "html",
           ".pdf": "pdf", ".jsonl": "jsonl", ".docx": "docx", ".docm": "docx", ".pptx": "pptx", ".pptm": "pptx",
           ".xlsx": "xlsx", ".xlsm": "xlsx", ".csv": "csv", ".eml": "email"}
ATTACHED_TO = "attached_to"  # an attachment's metadata: the document id of the email it came in
_SIDECAR_KEYS = {"metadata", "scope", "title"}
_TITLE_MAX_CHARS = 120


@dataclass
class ParseBatch:
    documents: list[Document] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)


def is_sidecar(path: Path | str) -> bool:
    return str(path).endswith(SIDECAR_SUFFIX)


def scope_from_upload_path(rel_path: str | PurePosixPath) -> Scope:
    """Scope of an upload from its path relative to the uploads folder: `<tenant>[/<user>[/<chat>]]/...`.

    The first folders are tenant, user and chat: a file in `<tenant>/` is visible to the whole tenant, in
    `<tenant>/<user>/` to that user, in `<tenant>/<user>/<chat>/` to that chat; folders below the chat are
    plain subfolders (an agent scope comes only from a sidecar). Each scope folder must be a valid scope part
    (Scope). A file directly in the uploads folder has no owner and is refused rather than made visible to
    everyone.
    """
    parts = PurePosixPath(rel_path).parts[:-1]
    if not parts:
        raise ParseError("unscoped", f"{rel_path}: an upload must sit in a scope folder: "
                                     "<tenant>/, <tenant>/<user>/ or <tenant>/<user>/<chat>/")
    if any(part in ("..", ".") for part in parts):
        raise ParseError("outside_root", f"{rel_path}: relative path components are not allowed")
    try:
        return Scope(*parts[:3])
    except ScopeError as e:
        raise ParseError("malformed", f"{rel_path}: bad scope folder: {e}") from e


def document_hash(text: str, title: str, metadata: dict[str, Any], scope: Scope) -> str:
    """What incremental ingestion compares: changes when anything a chunk carries changes.

    The text alone is not enough: a sidecar that moves a file to another scope must re-ingest it.
    """
    payload = {"text": text, "title": title, "metadata": metadata, "scope": scope.path}
    return sha256_hex(json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str))


def decode_text(data: bytes) -> str:
    """UTF-8 (with or without BOM), or UTF-16 with a BOM; anything else is binary or undecodable."""
    if not data:
        raise ParseError("empty", "zero-byte file")
    if data.startswith(codecs.BOM_UTF8):
        encoding = "utf-8-sig"
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    else:
        sample = data[:8192]
        controls = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13, 11, 27))
        if b"\x00" in data or controls > len(sample) * 0.05:
            raise ParseError("binary", "NUL or control bytes: not a text file")
        encoding = "utf-8"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as e:
        raise ParseError("undecodable", f"not {encoding}: byte {e.start}: {e.reason} "
                                        "(accepted: UTF-8, or UTF-16 with a BOM)") from e
    if "\x00" in text:
        raise ParseError("binary", "NUL characters in decoded text")
    if not text.strip():
        raise ParseError("empty", "no text (only whitespace)")
    return text


def parse_path(
    path: Path | str,
    root: Path | str,
    *,
    scope: Scope | None = None,
    scope_from_path: bool = False,
    max_bytes: int | None = None,
    limits: ParseLimits | None = None,
    on_reject: Callable[[Rejection], None] | None = None,
) -> list[Document]:
    """The documents in one file (a JSONL file yields one per line, an email one more per parsed attachment).

    ``path`` is absolute or relative to ``root``; the document id is the POSIX path relative to ``root``
    (JSONL: ``<path>#<line id>``; an email's attachment: ``<path>#<file name>``). A whole-file problem raises
    ParseError. A bad JSONL line, a bad attachment, or pages of a PDF without text go to ``on_reject`` when
    given (the rest still parses), else a bad line raises too. ``max_bytes`` overrides ``limits.max_bytes``.
    """
    limits = limits or ParseLimits()
    lexical, real, rel = _locate(Path(path), Path(root))
    fmt = FORMATS.get(PurePosixPath(rel).suffix.lower())  # the name as listed, even when a symlink
    if fmt is None:
        raise ParseError("unsupported", f"unsupported file type {Path(rel).suffix or '(none)'!r}; "
                                        f"supported: {', '.join(sorted(FORMATS))}")
    data, modified_at = _read_capped(real, limits.max_bytes if max_bytes is None else max_bytes)
    doc_scope = scope or Scope()
    if scope_from_path:
        doc_scope = _narrow(doc_scope, scope_from_upload_path(rel), rel)
    sidecar = _read_sidecar(lexical, Path(root))
    if "scope" in sidecar:
        doc_scope = _narrow(doc_scope, sidecar["scope"], rel)
    extra_metadata: dict[str, Any] = sidecar.get("metadata", {})
    sidecar_title: str = sidecar.get("title", "")

    if fmt == "jsonl":
        return jsonl_documents(decode_text(data), rel, scope=doc_scope, metadata=extra_metadata,
                               modified_at=modified_at, on_reject=on_reject)

    report = on_reject or (lambda rejection: None)  # without a listener, the metadata still names the pages
    parsed = parse_content(fmt, data, limits)
    documents = [_document(rel, rel, fmt, parsed, Path(rel).stem, sidecar_title, parsed.metadata, extra_metadata,
                           doc_scope, modified_at)]
    for reason, detail in parsed.problems:
        report(Rejection(rel, reason, detail))
    taken: set[str] = set()
    for attachment in parsed.attachments:
        name, copy = attachment.filename, 1
        while name in taken:  # two attachments of one name
            copy += 1
            name = f"{copy}-{attachment.filename}"
        taken.add(name)
        attachment_id = f"{rel}#{name}"
        attachment_fmt = FORMATS.get(PurePosixPath(name).suffix.lower())
        if attachment_fmt in (None, "jsonl", "email"):
            suffix = PurePosixPath(name).suffix or "(none)"
            report(Rejection(attachment_id, "unsupported", f"attachment type {suffix!r} is not parsed"))
            continue
        try:
            inner = parse_content(attachment_fmt, attachment.data, limits)
        except ParseError as e:
            report(Rejection(attachment_id, e.reason, e.detail))
            continue
        except Exception as e:  # as parse_sources: one odd attachment must not lose the email
            report(Rejection(attachment_id, "corrupt", f"{type(e).__name__}: {e}"))
            continue
        for reason, detail in inner.problems:
            report(Rejection(attachment_id, reason, detail))
        # the email's own metadata (sender, date) describes its attachments too, unless they say otherwise
        file_meta = {**parsed.metadata, **inner.metadata, ATTACHED_TO: rel}
        documents.append(_document(attachment_id, rel, attachment_fmt, inner, name, "", file_meta, extra_metadata,
                                   doc_scope, modified_at))
    return documents


def parse_content(fmt: str, data: bytes, limits: ParseLimits | None = None) -> Parsed:
    """One file's bytes in format ``fmt`` (a FORMATS value other than jsonl) as Markdown-like text."""
    limits = limits or ParseLimits()
    if fmt == "pdf":
        return pdf_to_text(data, ocr_languages=limits.ocr_languages)
    if fmt == "docx":
        return docx_to_text(data, limits)
    if fmt == "pptx":
        return pptx_to_text(data, limits)
    if fmt == "xlsx":
        return xlsx_to_text(data, limits)
    if fmt == "email":
        return eml_to_text(data)
    text = decode_text(data)
    if fmt == "csv":
        return csv_to_text(text, limits)
    if fmt == "html":
        try:
            text, title = html_to_text(text)
        except RecursionError as e:
            raise ParseError("corrupt", "HTML nested too deeply to parse") from e
        if not text.strip():
            raise ParseError("empty", "no text left after removing page boilerplate")
        return Parsed(text=text, title=title)
    if fmt in ("markdown", "text"):
        return Parsed(text=text)
    raise ParseError("unsupported", f"no parser for format {fmt!r}")


def _document(document_id: str, source_path: str, fmt: str, parsed: Parsed, fallback_title: str, sidecar_title: str,
              file_meta: dict[str, Any], sidecar_meta: dict[str, Any], scope: Scope, modified_at: float) -> Document:
    """A Document of parsed text: headings found in Markdown-like formats; metadata from the file, then the
    sidecar's, which wins."""
    headings = parse_headings(parsed.text) if fmt in MARKDOWN_FORMATS else []
    title = parsed.title or first_title(headings)
    if not title and fmt in ("text", "pdf"):
        title = _first_line_title(parsed.text)
    title = sidecar_title or title or fallback_title
    metadata = {**file_meta, **sidecar_meta}
    return Document(
        document_id=document_id, title=title, text=parsed.text, source_path=source_path, format=fmt,
        content_hash=document_hash(parsed.text, title, metadata, scope), modified_at=modified_at,
        headings=headings, page_starts=parsed.page_starts, metadata=metadata, scope=scope,
    )


def parse_sources(
    paths_or_dirs: Iterable[Path | str],
    root: Path | str,
    *,
    scope: Scope | None = None,
    scope_from_path: bool = False,
    max_bytes: int | None = None,
    limits: ParseLimits | None = None,
) -> ParseBatch:
    """Parse files and folders (walked recursively, in sorted order) under ``root``; never raises for one bad source.

    Hidden files and folders (a leading dot) and `*.meta.json` sidecars are not documents and are skipped.
    """
    batch = ParseBatch()
    seen: set[str] = set()
    root_abs = Path(os.path.abspath(root))
    for path in _iter_files(paths_or_dirs, Path(root), batch.rejections):
        key = os.path.normpath(root_abs / path)
        if key in seen:
            continue
        seen.add(key)
        try:
            batch.documents.extend(parse_path(path, root, scope=scope, scope_from_path=scope_from_path,
                                              max_bytes=max_bytes, limits=limits, on_reject=batch.rejections.append))
        except ParseError as e:
            batch.rejections.append(Rejection(_display(path, Path(root)), e.reason, e.detail))
        except OSError as e:
            batch.rejections.append(Rejection(_display(path, Path(root)), "unreadable", f"{type(e).__name__}: {e}"))
        except Exception as e:  # a parser bug on one odd file must not sink the batch; the detail says what
            batch.rejections.append(Rejection(_display(path, Path(root)), "corrupt", f"{type(e).__name__}: {e}"))
    return batch


# helpers ---------------------------------------------------------------------------------------------


def _locate(path: Path, root: Path) -> tuple[Path, Path, str]:
    """(path as named, real path, POSIX path relative to root); refuses `..` escapes and symlinks leaving root."""
    root_abs = Path(os.path.abspath(root))
    lexical = Path(os.path.normpath(path if path.is_absolute() else root_abs / path))
    try:
        rel = lexical.relative_to(root_abs).as_posix()
    except ValueError as e:
        raise ParseError("outside_root", f"{path} is outside the source root {root}") from e
    if rel == ".":
        if not lexical.exists():
            raise ParseError("unreadable", f"{path}: no such file or folder")
        raise ParseError("unsupported", f"{path} is the source root itself, not a file")
    try:
        real = lexical.resolve()
    except (OSError, RuntimeError, ValueError) as e:  # a symlink loop, a NUL or unencodable name
        raise ParseError("unreadable", f"{rel}: cannot resolve the path ({type(e).__name__}: {e})") from e
    if not real.is_relative_to(root_abs.resolve()):
        raise ParseError("outside_root", f"{rel} resolves to {real}, outside the source root")
    return lexical, real, rel


def _read_capped(real: Path, max_bytes: int) -> tuple[bytes, float]:
    try:
        # Checks run on the opened file, not the name (which may be swapped meanwhile); O_NONBLOCK so
        # that a FIFO never blocks the batch.
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError as e:
        raise ParseError("unreadable", "no such file") from e
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ParseError("unsupported", "not a regular file")
        if info.st_size > max_bytes:
            raise ParseError("oversized", f"{info.st_size} bytes > limit {max_bytes}")
        data = handle.read(max_bytes + 1)  # the file may have grown since fstat()
        after = os.fstat(fd)
    if len(data) > max_bytes:
        raise ParseError("oversized", f"more than {max_bytes} bytes")
    if len(data) != after.st_size or (after.st_size, after.st_mtime_ns) != (info.st_size, info.st_mtime_ns):
        # a write in progress: half a file would be indexed as if it were the document
        raise ParseError("unreadable", "the file changed while it was read; the next run reads it again")
    return data, info.st_mtime


def _read_sidecar(lexical: Path, root: Path) -> dict[str, Any]:
    sidecar = lexical.with_name(lexical.name + SIDECAR_SUFFIX)
    if not sidecar.exists() and not sidecar.is_symlink():
        return {}
    try:
        _, real_sidecar, _ = _locate(sidecar, root)
        data, _ = _read_capped(real_sidecar, SIDECAR_MAX_BYTES)
        raw = json.loads(decode_text(data))
    except (ParseError, json.JSONDecodeError) as e:
        raise ParseError("malformed", f"sidecar {sidecar.name}: {e}") from e
    if not isinstance(raw, dict) or set(raw) - _SIDECAR_KEYS:
        # a typo such as "scopes" must not silently publish a private file to everyone
        raise ParseError("malformed", f"sidecar {sidecar.name}: expected an object with keys from "
                                      f"{sorted(_SIDECAR_KEYS)}, got {sorted(raw) if isinstance(raw, dict) else raw!r}")
    out: dict[str, Any] = {}
    if "metadata" in raw:
        if not isinstance(raw["metadata"], dict):
            raise ParseError("malformed", f"sidecar {sidecar.name}: 'metadata' must be an object")
        out["metadata"] = raw["metadata"]
    if "title" in raw:
        if not isinstance(raw["title"], str):
            raise ParseError("malformed", f"sidecar {sidecar.name}: 'title' must be a string")
        out["title"] = raw["title"].strip()
    if "scope" in raw:
        value = raw["scope"]
        try:
            if isinstance(value, str):
                out["scope"] = Scope.from_path(value)
            elif isinstance(value, dict) and set(value) <= {"tenant", "user", "chat", "agent"} and all(
                isinstance(v, str) for v in value.values()
            ):
                out["scope"] = Scope(**value)
            else:
                raise ValueError("expected a path string or an object with tenant/user/chat/agent strings")
        except ValueError as e:
            raise ParseError("malformed", f"sidecar {sidecar.name}: bad scope {value!r:.200}: {e}") from e
    return out


def _narrow(base: Scope, declared: Scope, rel: str) -> Scope:
    """A declared scope may only narrow the one a document already has, never widen or move it."""
    if base.path not in declared.visible_paths():
        raise ParseError("scope_conflict", f"{rel}: scope {declared.path!r} is not inside {base.path!r}")
    return declared


def jsonl_documents(
    text: str, source_path: str, *, scope: Scope | None = None, metadata: dict[str, Any] | None = None,
    record_metadata: bool = True, bare_ids: bool = False, fmt: str | None = "jsonl", modified_at: float = 0.0,
    on_reject: Callable[[Rejection], None] | None = None,
) -> list[Document]:
    """The documents of a JSON Lines text, one per record (ragloom.parsing.jsonl), for ingestion and for
    evaluation corpora alike.

    Ids are ``<source_path>#<record id>``, or the bare record id with ``bare_ids`` (evaluation qrels name
    them). ``metadata`` is added to every document, then the record's own unless ``record_metadata`` is off.
    ``fmt`` None: ``markdown`` when the record has headings (or says so in its metadata), else ``text``.
    A bad line goes to ``on_reject`` when given (the others still parse), else it raises.
    """
    scope = scope or Scope()
    documents = []
    for item in read_jsonl(text):
        if isinstance(item, ParseError):
            if on_reject is None:
                raise item
            on_reject(Rejection(source_path, item.reason, item.detail))
            continue
        documents.append(_jsonl_document(item, source_path, scope, metadata or {}, record_metadata, bare_ids,
                                         fmt, modified_at))
    if not documents and on_reject is None:
        raise ParseError("empty", "no documents in the JSONL file")
    return documents


def _jsonl_document(record: JsonlRecord, source_path: str, scope: Scope, extra: dict[str, Any], record_metadata: bool,
                    bare_ids: bool, fmt: str | None, modified_at: float) -> Document:
    metadata = {**extra, **record.metadata} if record_metadata else dict(extra)
    title = record.title or record.record_id
    headings = parse_headings(record.text)
    if fmt is None:
        fmt = "markdown" if headings or record.metadata.get("format") == "markdown" else "text"
    # JSONL text is kept byte-for-byte: evaluation data gives gold passages as offsets into it.
    return Document(
        document_id=record.record_id if bare_ids else f"{source_path}#{record.record_id}", title=title,
        text=record.text, source_path=source_path, format=fmt,
        content_hash=document_hash(record.text, title, metadata, scope), modified_at=modified_at,
        headings=headings, metadata=metadata, scope=scope,
    )


def _first_line_title(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= _TITLE_MAX_CHARS else ""
    return ""


def _display(path: Path | str, root: Path) -> str:
    """The path as a rejection shows it: relative to root when inside it, else as given."""
    path = Path(path)
    absolute = Path(os.path.normpath(path if path.is_absolute() else Path(os.path.abspath(root)) / path))
    try:
        return absolute.relative_to(os.path.abspath(root)).as_posix()
    except ValueError:
        return str(path)


def _folder_inside(folder: Path, root_abs: Path) -> bool:
    """Whether a folder lies in the root, both as named (`..` resolved lexically) and after symlinks."""
    lexical = Path(os.path.normpath(folder))
    try:
        return lexical.is_relative_to(root_abs) and lexical.resolve().is_relative_to(root_abs.resolve())
    except (OSError, RuntimeError, ValueError):  # a symlink loop or an unencodable name: not walked
        return False


def _iter_files(paths_or_dirs: Iterable[Path | str], root: Path, rejections: list[Rejection]) -> Iterable[Path]:
    root_abs = Path(os.path.abspath(root))
    for given in paths_or_dirs:
        path = Path(given)
        absolute = path if path.is_absolute() else root_abs / path
        if is_sidecar(absolute):
            continue
        try:
            is_dir = absolute.is_dir()
        except OSError:  # e.g. a name longer than the file system allows: parse_path reports it
            is_dir = False
        if is_dir and not absolute.is_symlink():
            if not _folder_inside(absolute, root_abs):
                # walking it would list every file below (for "/", the whole machine) only to refuse each one
                rejections.append(Rejection(_display(path, root), "outside_root",
                                            f"{given} is a folder outside the source root {root}: not walked"))
                continue
            for folder, dirnames, filenames in os.walk(absolute):
                dirnames.sort()
                for name in list(dirnames):
                    if name.startswith("."):
                        dirnames.remove(name)
                    elif (Path(folder) / name).is_symlink():
                        dirnames.remove(name)
                        rejections.append(Rejection(_display(Path(folder) / name, root), "unsupported",
                                                    "symlinked folder: not followed"))
                for name in sorted(filenames):
                    if not name.startswith(".") and not is_sidecar(name):
                        yield Path(folder) / name
        elif is_dir:
            rejections.append(Rejection(_display(path, root), "unsupported", "symlinked folder: not followed"))
        else:
            yield path  # parse_path reports a missing file or one outside the root
