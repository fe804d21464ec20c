"""OCR of scanned PDF pages (RAGLOOM_PARSE_OCR_LANGUAGES): a page that is only an image is read by Tesseract when OCR
is on, reported with the reason when it is off or cannot run. The scanned page is made here: text drawn by Pillow
onto an image, which Pillow writes as an image-only PDF page, appended by pypdf after a page with a text layer.

Debian's tesseract-ocr must be installed (scripts/test installs it, as scripts/ocr-deps.sh)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from ragloom.errors import ConfigError
from ragloom.parsing import ParseLimits, parse_sources
from ragloom.parsing.pdf import pdf_to_text
from ragloom.settings import Settings

SCANNED = ["Scanned survey memo", "Kelp beds grew nine percent", "near the Lisbon buoys"]


def scanned_pdf(path: Path, make_pdf, text_lines: list[str], scanned_lines: list[str]) -> Path:
    """Page 1 with a text layer (``text_lines``), page 2 an image of ``scanned_lines`` and nothing else."""
    from PIL import Image, ImageDraw, ImageFont
    from pypdf import PdfWriter

    image = Image.new("L", (1700, 2200), 255)  # a letter page at 200 dpi
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=56)
    for i, line in enumerate(scanned_lines):
        draw.text((120, 150 + i * 110), line, fill=0, font=font)
    scan = io.BytesIO()
    image.save(scan, format="PDF", resolution=200)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = PdfWriter()
    writer.append(make_pdf(path.with_suffix(".text.pdf"), [text_lines]))
    writer.append(io.BytesIO(scan.getvalue()))
    with path.open("wb") as out:
        writer.write(out)
    path.with_suffix(".text.pdf").unlink()
    return path


def words(text: str) -> list[str]:
    return text.lower().split()


@pytest.fixture
def mixed_pdf(tmp_path, make_pdf) -> Path:
    return scanned_pdf(tmp_path / "docs" / "memo.pdf", make_pdf, ["page one has text"], SCANNED)


def test_tesseract_is_installed():
    assert shutil.which("tesseract"), "Debian's tesseract-ocr is missing: scripts/ocr-deps.sh installs it"


def test_ocr_reads_the_scanned_page_into_its_place(mixed_pdf):
    parsed = pdf_to_text(mixed_pdf.read_bytes(), ocr_languages="eng")
    assert parsed.metadata["pages_ocr"] == [2] and "pages_without_text" not in parsed.metadata
    assert parsed.problems == []
    first, second = (parsed.text[start:end] for start, end in
                     zip(parsed.page_starts, [*parsed.page_starts[1:], len(parsed.text)], strict=True))
    assert first.strip() == "page one has text"
    assert words(second) == words(" ".join(SCANNED))  # the page's own words, in order, on its own page


def test_ocr_is_off_by_default_and_the_page_is_reported(tmp_path, mixed_pdf):
    assert Settings().parse_ocr_languages == "" and ParseLimits().ocr_languages == ""
    batch = parse_sources([mixed_pdf.parent], mixed_pdf.parent)
    (doc,) = batch.documents
    assert doc.metadata["pages_without_text"] == [2] and "pages_ocr" not in doc.metadata
    assert "kelp" not in words(doc.text)
    (rejection,) = batch.rejections
    assert rejection.reason == "pages_without_text"
    assert "page(s) 2" in rejection.detail and "OCR is off: RAGLOOM_PARSE_OCR_LANGUAGES" in rejection.detail


def test_ocr_setting_reaches_the_parser(mixed_pdf):
    batch = parse_sources([mixed_pdf.parent], mixed_pdf.parent, limits=ParseLimits(ocr_languages="eng"))
    (doc,) = batch.documents
    assert batch.rejections == [] and doc.metadata["pages_ocr"] == [2] and "kelp" in words(doc.text)


def test_a_page_ocr_cannot_read_is_still_reported(mixed_pdf, monkeypatch):
    import pytesseract

    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", str(mixed_pdf.parent / "no-tesseract-here"))
    batch = parse_sources([mixed_pdf.parent], mixed_pdf.parent, limits=ParseLimits(ocr_languages="eng"))
    (doc,) = batch.documents
    assert doc.metadata["pages_without_text"] == [2]
    (rejection,) = batch.rejections
    assert "OCR failed: tesseract is not installed" in rejection.detail


def test_a_wholly_scanned_pdf_is_read_with_ocr_and_rejected_without(tmp_path, make_pdf):
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("L", (1700, 2200), 255)
    ImageDraw.Draw(image).text((120, 150), SCANNED[1], fill=0, font=ImageFont.load_default(size=56))
    path = tmp_path / "scan.pdf"
    image.save(path, format="PDF", resolution=200)
    assert words(pdf_to_text(path.read_bytes(), ocr_languages="eng").text) == words(SCANNED[1])
    batch = parse_sources([path], tmp_path)
    (rejection,) = batch.rejections
    assert batch.documents == [] and rejection.reason == "empty" and "OCR is off" in rejection.detail


@pytest.mark.parametrize("value", ["eng deu", "eng;rm -rf", "+eng"])
def test_bad_ocr_languages_are_refused(value):
    with pytest.raises(ConfigError, match="RAGLOOM_PARSE_OCR_LANGUAGES"):
        Settings(parse_ocr_languages=value).validate()
