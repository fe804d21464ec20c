"""Shared unit-test fixtures: a minimal PDF writer, a few real documents from ../shared/data, the token counter."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def _literal(text: str) -> bytes:
    """A PDF string literal of cp1252 text."""
    out = bytearray(b"(")
    for byte in text.encode("cp1252"):
        if byte in b"()\\":
            out += b"\\" + bytes([byte])
        elif byte < 32 or byte > 126:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out + b")")


def write_text_pdf(path: Path, pages: list[list[str]], title: str = "") -> Path:
    """A valid PDF with one Helvetica text line per string, so pypdf can extract real text.

    pypdf cannot render text, so the file is written by hand: objects, a content stream per page and an
    xref table with exact byte offsets. Characters outside cp1252 are not supported.
    """

    streams = [b"BT /F1 10 Tf 13 TL 60 740 Td " + b" ".join(_literal(line) + b" Tj T*" for line in lines) + b" ET"
               for lines in pages]
    return _write_pdf(path, streams, _literal(title))


def write_table_pdf(path: Path, above: list[str], rows: list[list[str]], below: list[str]) -> Path:
    """A one-page PDF: text lines, a ruled table (every cell boxed by drawn lines, as pdfplumber's table finder
    expects), text lines; Helvetica, cp1252 text."""

    def text_at(x: float, y: float, text: str) -> bytes:
        return b"BT /F1 10 Tf %.1f %.1f Td %s Tj ET" % (x, y, _literal(text))

    ops: list[bytes] = []
    y = 740.0
    for line in above:
        ops.append(text_at(60, y, line))
        y -= 14
    top, row_height, col_width = y - 6, 20.0, 150.0
    width = max(len(r) for r in rows)
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            ops.append(text_at(60 + c * col_width + 4, top - (r + 1) * row_height + 6, cell))
    for r in range(len(rows) + 1):
        ops.append(b"60 %.1f m %.1f %.1f l S" % (top - r * row_height, 60 + width * col_width, top - r * row_height))
    for c in range(width + 1):
        ops.append(b"%.1f %.1f m %.1f %.1f l S" % (60 + c * col_width, top, 60 + c * col_width,
                                                  top - len(rows) * row_height))
    y = top - len(rows) * row_height - 20
    for line in below:
        ops.append(text_at(60, y, line))
        y -= 14
    return _write_pdf(path, [b"\n".join(ops)], b"()")


def _write_pdf(path: Path, streams: list[bytes], title: bytes) -> Path:
    """Objects, one content stream per page and an xref table with exact byte offsets."""
    objects: list[bytes] = []  # object i+1
    page_ids = [4 + 2 * i for i in range(len(streams))]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(b"<< /Type /Pages /Kids [%s] /Count %d >>"
                   % (b" ".join(b"%d 0 R" % pid for pid in page_ids), len(streams)))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for pid, stream in zip(page_ids, streams, strict=True):
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                       b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (pid + 1))
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    info_id = len(objects) + 1
    objects.append(b"<< /Title %s /Producer (ragloom tests) >>" % title)

    body = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(body))
        body += b"%d 0 obj\n%s\nendobj\n" % (number, obj)
    xref = len(body)
    body += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    body += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    body += b"trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, info_id, xref)
    path.write_bytes(bytes(body))
    return path


@pytest.fixture
def make_pdf() -> Callable[..., Path]:
    return write_text_pdf


def read_jsonl_head(path: Path, n: int) -> list[dict]:
    """The first n records of a large JSONL file, without reading the rest."""
    records = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            records.append(json.loads(line))
            if len(records) == n:
                break
    return records


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"evaluation data missing: {path} (see ../shared/data/README.md)")
    return path


@pytest.fixture(scope="session")
def obliqa_jsonl_lines() -> list[str]:
    """The first four ObliQA rulebooks as raw JSONL lines (Markdown text, numbered headings)."""
    path = _require(SHARED_DATA / "obliqa" / "corpus.jsonl")
    with path.open(encoding="utf-8") as handle:
        return [next(handle) for _ in range(4)]


@pytest.fixture(scope="session")
def scifact_jsonl_lines() -> list[str]:
    """The first twenty SciFact abstracts as raw JSONL lines."""
    path = _require(SHARED_DATA / "scifact" / "corpus.jsonl")
    with path.open(encoding="utf-8") as handle:
        return [next(handle) for _ in range(20)]


@pytest.fixture(scope="session")
def token_counter():
    from ragloom.chunking.tokens import get_token_counter

    return get_token_counter()


@pytest.fixture(scope="session")
def real_embedder():
    """The real default model (all-MiniLM-L6-v2, PyTorch), loaded once per test session: it takes seconds."""
    from ragloom.embedding.sentence_transformer import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()
