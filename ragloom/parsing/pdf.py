"""PDF -> text with a page map: pdfplumber reads each page (tables as pipe tables where they stand, the text around
them in reading order), pypdf the document (encryption, title, author, dates). Pages without text are reported;
scanned or broken PDFs become a ParseError."""

from __future__ import annotations

import io
import logging
from typing import Any

from ragloom.errors import ParseError
from ragloom.parsing.base import Parsed, file_metadata
from ragloom.parsing.markdown import markdown_table

PAGE_SEPARATOR = "\n\n"


def pdf_to_text(data: bytes) -> Parsed:
    """Page i+1 starts at text offset ``page_starts[i]``; ``metadata["pages_without_text"]`` lists the pages
    that gave no text (each also a ``problems`` entry saying why), when some did and others did not."""
    from pypdf import PdfReader

    # pypdf and pdfminer log every recoverable oddity as a warning; the outcome is what matters here.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    logging.getLogger("pdfminer").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ParseError("encrypted", "encrypted PDF (needs a password)")
        metadata, title = _document_info(reader)
        pages = _pages(data)
    except ParseError:
        raise
    except Exception as e:  # pypdf and pdfminer raise many kinds (PdfReadError, ValueError, KeyError, ...) on bad files
        raise ParseError("corrupt", f"unreadable PDF: {type(e).__name__}: {e}") from e
    if not pages:
        raise ParseError("corrupt", "PDF has no pages")
    parts: list[str] = []
    page_starts: list[int] = []
    offset = 0
    for i, (page_text, _) in enumerate(pages):
        if i:
            parts.append(PAGE_SEPARATOR)
            offset += len(PAGE_SEPARATOR)
        page_starts.append(offset)
        parts.append(page_text)
        offset += len(page_text)
    text = "".join(parts)
    if not text.strip():
        raise ParseError("empty", f"no extractable text in {len(pages)} page(s) (a scanned PDF needs OCR)")
    parsed = Parsed(text=text, title=title, metadata=metadata, page_starts=page_starts)
    textless = [(number, images) for number, (page_text, images) in enumerate(pages, start=1) if not page_text.strip()]
    if textless:
        parsed.metadata["pages_without_text"] = [number for number, _ in textless]
        scanned = [str(n) for n, images in textless if images]
        blank = [str(n) for n, images in textless if not images]
        detail = f"{len(textless)} of {len(pages)} pages gave no text: "
        detail += "; ".join(part for part in (
            f"page(s) {', '.join(scanned)}: images without a text layer (scanned; OCR is not available)"
            if scanned else "",
            f"page(s) {', '.join(blank)}: blank" if blank else "") if part)
        parsed.problems.append(("pages_without_text", detail))
    return parsed


def _document_info(reader: Any) -> tuple[dict[str, Any], str]:
    info = reader.metadata
    if info is None:
        return {}, ""
    values: dict[str, Any] = {"author": info.author}
    for key, attribute in (("created", "creation_date"), ("modified", "modification_date")):
        try:
            values[key] = getattr(info, attribute)
        except (ValueError, TypeError):  # a malformed date string: left out, not the document
            pass
    return file_metadata(**values), str(info.title or "").strip()


def _pages(data: bytes) -> list[tuple[str, bool]]:
    """(text, has images) per page."""
    import pdfplumber

    with pdfplumber.open(io.BytesIO(data)) as pdf:
        return [(_page_text(page), bool(page.images)) for page in pdf.pages]


def _page_text(page: Any) -> str:
    """The page's text with each table as a pipe table in its place: text above a table, the table, then what
    stands beside or below it. Text keeps the order of the page's content stream (reading order as the producer
    wrote it, so columns stay whole), lines broken where the text moves to a new line."""
    tables = sorted(page.find_tables(), key=lambda t: t.bbox[1])
    boxes = [t.bbox for t in tables]

    def slot(obj: dict[str, Any]) -> int:
        """How many tables start above this character; -1 inside a table (its text is in the table)."""
        x, y = (obj["x0"] + obj["x1"]) / 2, (obj["top"] + obj["bottom"]) / 2
        if any(x0 <= x <= x1 and top <= y <= bottom for x0, top, x1, bottom in boxes):
            return -1
        return sum(1 for _, top, _, _ in boxes if top <= y)

    blocks: list[str] = []
    for k in range(len(tables) + 1):
        if k:
            table = markdown_table([[cell or "" for cell in row] for row in tables[k - 1].extract()])
            if table:
                blocks.append(table)
        part = page.filter(lambda obj, k=k: obj.get("object_type") != "char" or slot(obj) == k) if tables else page
        text = part.extract_text(use_text_flow=True) or ""
        text = text.replace("\r\n", "\n").replace("\r", "\n").strip("\n")
        if text.strip():
            blocks.append(text)
    return "\n\n".join(blocks)
