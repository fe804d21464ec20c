"""PDF -> text with a page map: pdfplumber reads each page (tables as pipe tables where they stand, the text around
them in reading order), pypdf the document (encryption, title, author, dates). Pages with images but no text layer
(scanned) are read by Tesseract when OCR is on (RAGLOOM_PARSE_OCR_LANGUAGES); pages still without text are reported;
broken PDFs, and scanned ones without OCR, become a ParseError."""

from __future__ import annotations

import io
import logging
from typing import Any

from ragloom.errors import ParseError
from ragloom.parsing.base import Parsed, file_metadata
from ragloom.parsing.markdown import markdown_table

PAGE_SEPARATOR = "\n\n"
OCR_RESOLUTION = 300  # dpi a page is rendered at for Tesseract (its documentation's advice for body text)


def pdf_to_text(data: bytes, ocr_languages: str = "") -> Parsed:
    """Page i+1 starts at text offset ``page_starts[i]``; ``metadata["pages_without_text"]`` lists the pages
    that gave no text (each also a ``problems`` entry saying why), when some did and others did not.
    ``ocr_languages`` (tesseract's, e.g. "eng"): scanned pages are read by OCR, listed in ``metadata["pages_ocr"]``."""
    from pypdf import PdfReader

    # pypdf and pdfminer log every recoverable oddity as a warning; the outcome is what matters here.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    logging.getLogger("pdfminer").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ParseError("encrypted", "encrypted PDF (needs a password)")
        metadata, title = _document_info(reader)
        pages = _pages(data, ocr_languages)
    except ParseError:
        raise
    except Exception as e:  # pypdf and pdfminer raise many kinds (PdfReadError, ValueError, KeyError, ...) on bad files
        raise ParseError("corrupt", f"unreadable PDF: {type(e).__name__}: {e}") from e
    if not pages:
        raise ParseError("corrupt", "PDF has no pages")
    parts: list[str] = []
    page_starts: list[int] = []
    offset = 0
    for i, (page_text, _, _) in enumerate(pages):
        if i:
            parts.append(PAGE_SEPARATOR)
            offset += len(PAGE_SEPARATOR)
        page_starts.append(offset)
        parts.append(page_text)
        offset += len(page_text)
    text = "".join(parts)
    ocr_notes = {note for page_text, images, note in pages if images and not page_text.strip()}
    if not text.strip():
        raise ParseError("empty", f"no extractable text in {len(pages)} page(s) (scanned: {_ocr_why(ocr_notes)})")
    parsed = Parsed(text=text, title=title, metadata=metadata, page_starts=page_starts)
    read_by_ocr = [number for number, (page_text, _, note) in enumerate(pages, start=1) if note == _READ and page_text]
    if read_by_ocr:
        parsed.metadata["pages_ocr"] = read_by_ocr
    textless = [(number, images) for number, (page_text, images, _) in enumerate(pages, start=1)
                if not page_text.strip()]
    if textless:
        parsed.metadata["pages_without_text"] = [number for number, _ in textless]
        scanned = [str(n) for n, images in textless if images]
        blank = [str(n) for n, images in textless if not images]
        detail = f"{len(textless)} of {len(pages)} pages gave no text: "
        detail += "; ".join(part for part in (
            f"page(s) {', '.join(scanned)}: images without a text layer (scanned; {_ocr_why(ocr_notes)})"
            if scanned else "",
            f"page(s) {', '.join(blank)}: blank" if blank else "") if part)
        parsed.problems.append(("pages_without_text", detail))
    return parsed


_READ = "read by OCR"
_OFF = "OCR is off: RAGLOOM_PARSE_OCR_LANGUAGES"


def _ocr_why(notes: set[str]) -> str:
    """Why scanned pages gave no text: OCR off, found nothing, or failed (tesseract missing, say)."""
    return "; ".join(sorted(notes - {_READ})) or _OFF


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


def _pages(data: bytes, ocr_languages: str = "") -> list[tuple[str, bool, str]]:
    """(text, has images, what OCR did) per page; a page with images and no text layer goes to OCR when it is on."""
    import pdfplumber

    pages = []
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        for page in pdf.pages:
            text, images, note = _page_text(page), bool(page.images), ""
            if images and not text.strip():
                text, note = _ocr(page, ocr_languages) if ocr_languages else ("", _OFF)
            pages.append((text, images, note))
    return pages


def _ocr(page: Any, languages: str) -> tuple[str, str]:
    """The page rendered (pypdfium2, through pdfplumber) and read by Tesseract: (text, what happened)."""
    import pytesseract  # deferred: only with OCR on (and it needs the tesseract program)

    try:
        image = page.to_image(resolution=OCR_RESOLUTION).original
        text = pytesseract.image_to_string(image, lang=languages)
    except (pytesseract.TesseractNotFoundError, pytesseract.TesseractError, RuntimeError, OSError) as e:
        reason = "tesseract is not installed (Debian: apt-get install tesseract-ocr)" \
            if isinstance(e, pytesseract.TesseractNotFoundError) else f"{type(e).__name__}: {e}"
        return "", f"OCR failed: {str(reason).strip()[:200]}"
    lines = [line.rstrip() for line in text.replace("\f", "").splitlines()]
    text = "\n".join(lines).strip("\n")
    return (text, _READ) if text.strip() else ("", "OCR found no text")


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
