"""PDF -> text with a page map (pypdf); scanned or broken PDFs become a ParseError."""

from __future__ import annotations

import io
import logging

from ragloom.errors import ParseError

PAGE_SEPARATOR = "\n\n"


def pdf_to_text(data: bytes) -> tuple[str, list[int], str]:
    """(text, page_starts, title): page i+1 starts at text offset page_starts[i]."""
    from pypdf import PdfReader

    # pypdf logs every recoverable oddity as a warning; the outcome is what matters here.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ParseError("corrupt", "encrypted PDF (needs a password)")
        title = ""
        if reader.metadata is not None and reader.metadata.title:
            title = str(reader.metadata.title).strip()
        pages = [(page.extract_text() or "") for page in reader.pages]
    except ParseError:
        raise
    except Exception as e:  # pypdf raises many kinds (PdfReadError, ValueError, KeyError, ...) on bad files
        raise ParseError("corrupt", f"unreadable PDF: {type(e).__name__}: {e}") from e
    if not pages:
        raise ParseError("corrupt", "PDF has no pages")
    parts: list[str] = []
    page_starts: list[int] = []
    offset = 0
    for i, page_text in enumerate(pages):
        page_text = page_text.replace("\r\n", "\n").replace("\r", "\n").strip("\n")
        if i:
            parts.append(PAGE_SEPARATOR)
            offset += len(PAGE_SEPARATOR)
        page_starts.append(offset)
        parts.append(page_text)
        offset += len(page_text)
    text = "".join(parts)
    if not text.strip():
        raise ParseError("empty", f"no extractable text in {len(pages)} page(s) (a scanned PDF needs OCR)")
    return text, page_starts, title
