"""Word, PowerPoint, Excel, CSV, email and PDF tables: structure kept, file metadata read, bad input rejected."""

from __future__ import annotations

import io
import re
import struct
import zipfile
from pathlib import Path

import pytest
from docx import Document as WordDocument
from openpyxl import Workbook

from ragloom.parsing import ParseLimits, parse_path, parse_sources
from ragloom.parsing.markdown import find_tables, markdown_table
from ragloom.settings import SAMPLE_CORPUS
from tests.unit.conftest import write_table_pdf

REPORT = "reports/quarterly_review_q3_2024.docx"
SLIDES = "company/strategy_2025.pptx"
SHEETS = "reports/sensor_fleet_2024.xlsx"
CUSTOMERS = "customers/customers.csv"
EMAIL = "news/kelpwatch_shipped.eml"


def reasons(batch) -> dict[str, str]:
    return {r.source_path: r.reason for r in batch.rejections}


def one(rel: str, root: Path = SAMPLE_CORPUS, **kwargs):
    (doc,) = [d for d in parse_path(rel, root, **kwargs) if d.document_id == rel]
    return doc


def heading_titles(doc) -> list[tuple[int, str]]:
    return [(h.level, h.title) for h in doc.headings]


def assert_headings_at_offsets(doc) -> None:
    for h in doc.headings:
        assert doc.text[h.start:].startswith("#" * h.level + " " + h.title)


# the sample files ----------------------------------------------------------------------------------------------


def test_word_headings_lists_tables_and_core_properties():
    doc = one(REPORT)
    assert doc.format == "docx" and doc.title == "Quarterly Business Review Q3 2024"
    assert heading_titles(doc) == [(1, "Quarterly Business Review Q3 2024"), (2, "Summary"),
                                   (2, "Revenue by business unit"), (2, "Risks"), (3, "Supply chain"),
                                   (3, "Customers")]
    assert_headings_at_offsets(doc)
    assert "- Battery cells for TideLens come from a single supplier.\n- Optical filters" in doc.text
    (table,) = find_tables(doc.text)
    assert doc.text[table.start:table.header_end] == (
        "| Business unit | Revenue (NOK million) | Growth |\n| --- | --- | --- |")
    assert "| HarborSight software | 54 | 31% |" in doc.text
    assert doc.metadata == {"author": "Priya Raman", "created": "2024-11-04T09:00:00+00:00",
                            "modified": "2024-11-18T16:30:00+00:00", "last_modified_by": "Priya Raman"}


def test_slides_titles_bullets_tables_notes():
    doc = one(SLIDES)
    assert doc.format == "pptx" and doc.title == "Corvane Strategy 2025"
    assert heading_titles(doc) == [(1, "Corvane Strategy 2025"), (1, "Three priorities"), (1, "Targets for 2025")]
    assert_headings_at_offsets(doc)
    assert "- Make HarborSight the operating system of the port\n  - Forecasts of currents" in doc.text
    assert "Notes: Tomas Okafor presents the HarborSight roadmap after this slide." in doc.text
    assert "| TideLens buoys deployed | 1,450 | 1,800 |" in doc.text
    assert doc.metadata["author"] == "Ingrid Solberg"


def test_workbook_sheets_are_sections_of_tables():
    doc = one(SHEETS)
    assert doc.format == "xlsx" and doc.title == "Sensor fleet 2024"
    assert heading_titles(doc) == [(1, "Fleet"), (1, "Service visits")]
    headers = [doc.text[t.start:t.header_end].split("\n")[0] for t in find_tables(doc.text)]
    assert headers == ["| Site | Customer | Product | Buoys | Uptime % |", "| Date | Site | Technician | Reason |"]
    assert "| Halifax Harbour | Halifax Harbour Trust | TideLens Harbour | 12 | 99.2 |" in doc.text
    assert "| 2024-06-02 | Lisbon coast | Chloé Martin | Anti-fouling housing check |" in doc.text
    assert doc.metadata["author"] == "Kenji Watanabe" and doc.metadata["created"].startswith("2024-11-04")


def test_csv_is_one_table_with_quoted_commas():
    doc = one(CUSTOMERS)
    assert doc.format == "csv" and doc.title == "customers" and doc.headings == []
    (table,) = find_tables(doc.text)
    assert len(table.body_rows) == 4
    assert "| Atlantic Aquaculture Group | Lisbon | Portugal | TideLens Kelp, KelpWatch, HarborSight |" in doc.text


def test_email_headers_body_and_attachment_documents():
    docs = {d.document_id: d for d in parse_path(EMAIL, SAMPLE_CORPUS)}
    mail = docs[EMAIL]
    assert mail.format == "email" and mail.title == "KelpWatch production units shipped"
    assert mail.metadata["author"] == "Maja Eriksen"
    assert mail.metadata["to"] == ["Tomas Okafor <tomas.okafor@corvane.example>",
                                   "Sofia Almeida <sofia.almeida@corvane.example>"]
    assert mail.metadata["date"] == "2024-10-07T14:05:00+02:00"
    assert "From: Maja Eriksen <maja.eriksen@corvane.example>" in mail.text
    assert "left the Tromsø optics site today" in mail.text
    attachment = docs[f"{EMAIL}#kelpwatch_shipment.csv"]
    assert attachment.format == "csv" and attachment.source_path == EMAIL
    assert attachment.metadata["attached_to"] == EMAIL and attachment.metadata["author"] == "Maja Eriksen"
    assert "| KW-2024-0009 | Halifax field laboratory | Calibration |" in attachment.text


def test_sidecar_metadata_wins_over_the_files(tmp_path):
    (tmp_path / "r.docx").write_bytes((SAMPLE_CORPUS / REPORT).read_bytes())
    (tmp_path / "r.docx.meta.json").write_text('{"title": "Board pack", "metadata": {"author": "Board office"}}')
    doc = one("r.docx", tmp_path)
    assert doc.title == "Board pack"
    assert doc.metadata["author"] == "Board office" and doc.metadata["created"].startswith("2024-11-04")


def test_the_sample_script_is_reproducible(tmp_path):
    import runpy
    import sys

    script = Path(__file__).resolve().parents[3] / "scripts" / "make-sample-formats.py"
    argv = sys.argv
    sys.argv = [str(script), str(tmp_path)]
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = argv
    for rel in (REPORT, SLIDES, SHEETS, CUSTOMERS, EMAIL):
        assert (tmp_path / rel).read_bytes() == (SAMPLE_CORPUS / rel).read_bytes(), rel


# made here -----------------------------------------------------------------------------------------------------


def word_bytes(build) -> bytes:
    document = WordDocument()
    build(document)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def test_word_without_title_style_keeps_heading_levels_and_numbered_lists(tmp_path):
    def build(d):
        d.add_heading("Scope", level=1)
        d.add_paragraph("First step", style="List Number")
        d.add_paragraph("Second step", style="List Number")
        d.add_heading("Detail", level=2)
        d.add_paragraph("A | pipe in text.")
        table = d.add_table(rows=2, cols=2)
        table.cell(0, 0).text, table.cell(0, 1).text = "Key", "Value"
        table.cell(1, 0).text, table.cell(1, 1).text = "a|b", "two\nlines"

    (tmp_path / "w.docx").write_bytes(word_bytes(build))
    doc = one("w.docx", tmp_path)
    assert heading_titles(doc) == [(1, "Scope"), (2, "Detail")]
    assert "- First step\n- Second step" in doc.text
    assert "| a\\|b | two lines |" in doc.text  # one row per line, the pipe escaped
    assert doc.title == "Scope"


def test_formulas_give_their_cached_values_and_empty_rows_go(tmp_path):
    book = Workbook()
    sheet = book.active
    sheet.title = "Budget"
    sheet.append(["Item", "Cost", None, None])
    sheet.append(["Buoys", 10.0])
    sheet.append([])
    sheet.append(["Moorings", 20.5])
    sheet.append(["Total", "=SUM(B2:B4)"])
    buffer = io.BytesIO()
    book.save(buffer)
    # openpyxl writes a formula without a value; Excel stores the last result beside it: add one as Excel would
    data = rewrite_entry(buffer.getvalue(), "xl/worksheets/sheet1.xml",
                         lambda xml: re.sub(rb"(<f>SUM\(B2:B4\)</f>)(<v\s*/>|<v></v>)?", rb"\1<v>30.5</v>", xml))
    (tmp_path / "budget.xlsx").write_bytes(data)
    doc = one("budget.xlsx", tmp_path)
    assert doc.text == ("# Budget\n\n| Item | Cost |\n| --- | --- |\n| Buoys | 10 |\n| Moorings | 20.5 |\n"
                        "| Total | 30.5 |")
    assert "SUM" not in doc.text


def test_macro_enabled_files_are_read_and_nothing_runs(tmp_path):
    vba = b"Attribute VB_Name = \"AutoOpen\"\nSub AutoOpen(): Shell \"calc\": End Sub\n"
    docm = rewrite_entry((SAMPLE_CORPUS / REPORT).read_bytes(), "[Content_Types].xml", lambda xml: xml.replace(
        b"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml",
        b"application/vnd.ms-word.document.macroEnabled.main+xml"), extra={"word/vbaProject.bin": vba})
    (tmp_path / "report.docm").write_bytes(docm)
    xlsm = rewrite_entry((SAMPLE_CORPUS / SHEETS).read_bytes(), "[Content_Types].xml", lambda xml: xml.replace(
        b"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml",
        b"application/vnd.ms-excel.sheet.macroEnabled.main+xml"), extra={"xl/vbaProject.bin": vba})
    (tmp_path / "fleet.xlsm").write_bytes(xlsm)
    batch = parse_sources([tmp_path], tmp_path)
    assert batch.rejections == []
    by_id = {d.document_id: d for d in batch.documents}
    assert by_id["report.docm"].format == "docx" and "Supply chain" in by_id["report.docm"].text
    assert by_id["fleet.xlsm"].format == "xlsx" and "Rotterdam Maasvlakte" in by_id["fleet.xlsm"].text
    assert all("AutoOpen" not in d.text for d in batch.documents)


def test_pdf_tables_become_pipe_tables_in_reading_order(tmp_path):
    rows = [["Site", "Buoys", "Uptime"], ["Halifax Harbour", "12", "99.2%"], ["Lisbon coast", "4", "97.5%"]]
    write_table_pdf(tmp_path / "fleet.pdf", ["Fleet report", "Deployed buoys by site:"], rows,
                    ["Uptime is measured monthly."])
    doc = one("fleet.pdf", tmp_path)
    assert doc.text == ("Fleet report\nDeployed buoys by site:\n\n" + markdown_table(rows)
                        + "\n\nUptime is measured monthly.")
    assert doc.page_starts == [0]


def test_partly_scanned_pdf_reports_its_pages_without_text(tmp_path, make_pdf):
    make_pdf(tmp_path / "mixed.pdf", [["page one has text"], [], ["page three too"], []])
    batch = parse_sources([tmp_path], tmp_path)
    (doc,) = batch.documents
    assert doc.metadata["pages_without_text"] == [2, 4]
    assert [doc.text[s:].split("\n")[0] for s in doc.page_starts] == ["page one has text", "", "page three too", ""]
    (rejection,) = batch.rejections
    assert (rejection.source_path, rejection.reason) == ("mixed.pdf", "pages_without_text")
    assert "2 of 4 pages" in rejection.detail and "2, 4" in rejection.detail


# bad input ------------------------------------------------------------------------------------------------------


def rewrite_entry(data: bytes, name: str, change, extra: dict[str, bytes] | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            content = source.read(info.filename)
            target.writestr(info.filename, change(content) if info.filename == name else content)
        for extra_name, content in (extra or {}).items():
            target.writestr(extra_name, content)
    return out.getvalue()


def test_bad_office_files_are_rejected_and_the_batch_goes_on(tmp_path):
    report = (SAMPLE_CORPUS / REPORT).read_bytes()
    (tmp_path / "good.docx").write_bytes(report)
    (tmp_path / "truncated.docx").write_bytes(report[: len(report) // 2])
    (tmp_path / "random.pptx").write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
    (tmp_path / "not-word.docx").write_bytes((SAMPLE_CORPUS / SHEETS).read_bytes())  # a workbook, renamed
    # a password-protected Office file: an OLE compound file holding an "EncryptedPackage" stream
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504) + "EncryptedPackage".encode("utf-16-le") + bytes(512)
    (tmp_path / "locked.xlsx").write_bytes(ole)
    (tmp_path / "legacy.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(1024))
    (tmp_path / "entries-encrypted.pptx").write_bytes(set_encrypted_flag((SAMPLE_CORPUS / SLIDES).read_bytes()))
    (tmp_path / "empty.csv").write_text("\n,,\n")
    batch = parse_sources([tmp_path], tmp_path)
    assert reasons(batch) == {"truncated.docx": "corrupt", "random.pptx": "corrupt", "not-word.docx": "unsupported",
                              "locked.xlsx": "encrypted", "legacy.docx": "unsupported",
                              "entries-encrypted.pptx": "encrypted", "empty.csv": "empty"}
    assert [d.document_id for d in batch.documents] == ["good.docx"]
    assert all(r.detail for r in batch.rejections)


def set_encrypted_flag(data: bytes) -> bytes:
    """Every entry of a zip marked encrypted (general purpose flag bit 0), in local and central headers."""
    out = bytearray(data)
    for signature, flag_offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        for match in re.finditer(re.escape(signature), out):
            (flags,) = struct.unpack_from("<H", out, match.start() + flag_offset)
            struct.pack_into("<H", out, match.start() + flag_offset, flags | 1)
    return bytes(out)


def test_encrypted_pdf_is_rejected(tmp_path, make_pdf):
    from pypdf import PdfReader, PdfWriter

    plain = make_pdf(tmp_path / "plain.pdf", [["secret figures"]])
    writer = PdfWriter(clone_from=PdfReader(plain))
    writer.encrypt("hunter2")
    with (tmp_path / "locked.pdf").open("wb") as handle:
        writer.write(handle)
    batch = parse_sources([tmp_path], tmp_path)
    assert reasons(batch) == {"locked.pdf": "encrypted"}


def test_zip_bomb_is_rejected_from_its_directory_before_unpacking(tmp_path):
    bomb = rewrite_entry((SAMPLE_CORPUS / REPORT).read_bytes(), "", lambda x: x,
                         extra={"word/media/padding.bin": bytes(5_000_000)})
    assert len(bomb) < 100_000  # zeros compress about 1000:1
    (tmp_path / "bomb.docx").write_bytes(bomb)
    (tmp_path / "fine.docx").write_bytes((SAMPLE_CORPUS / REPORT).read_bytes())
    batch = parse_sources([tmp_path], tmp_path, limits=ParseLimits(max_unpacked_bytes=1_000_000))
    assert reasons(batch) == {"bomb.docx": "oversized"}
    assert "RAGLOOM_PARSE_MAX_UNPACKED_BYTES" in batch.rejections[0].detail
    assert [d.document_id for d in batch.documents] == ["fine.docx"]


def test_absurd_sheets_hit_the_row_and_cell_caps(tmp_path):
    book = Workbook()
    for _ in range(30):
        book.active.append(["x", 1, 2])
    buffer = io.BytesIO()
    book.save(buffer)
    (tmp_path / "rows.xlsx").write_bytes(buffer.getvalue())
    (tmp_path / "rows.csv").write_text("a,b\n" + "1,2\n" * 30)
    (tmp_path / "small.csv").write_text("a,b\n1,2\n")
    batch = parse_sources([tmp_path], tmp_path, limits=ParseLimits(max_sheet_rows=20))
    assert reasons(batch) == {"rows.xlsx": "oversized", "rows.csv": "oversized"}
    assert [d.document_id for d in batch.documents] == ["small.csv"]
    cells = parse_sources([tmp_path], tmp_path, limits=ParseLimits(max_cells=50))
    assert reasons(cells) == {"rows.xlsx": "oversized", "rows.csv": "oversized"}
    assert "RAGLOOM_PARSE_MAX_CELLS" in cells.rejections[0].detail


def test_bad_attachments_are_rejected_and_the_email_is_kept(tmp_path):
    from email.message import EmailMessage

    message = EmailMessage()
    message["Subject"], message["From"], message["To"] = "Figures", "Priya Raman <priya@corvane.example>", "a@b.example"
    message.add_alternative("<html><body><h1>Q3</h1><p>See the <b>attached</b> files.</p></body></html>",
                            subtype="html")
    message.add_attachment(b"\x89PNG\r\n\x1a\n" + bytes(64), maintype="image", subtype="png", filename="logo.png")
    message.add_attachment(b"PK\x03\x04 broken", maintype="application", subtype="octet-stream",
                           filename="broken.docx")
    message.add_attachment((SAMPLE_CORPUS / REPORT).read_bytes(), maintype="application", subtype="octet-stream",
                           filename="review.docx")
    (tmp_path / "figures.eml").write_bytes(bytes(message))
    batch = parse_sources([tmp_path], tmp_path)
    assert reasons(batch) == {"figures.eml#logo.png": "unsupported", "figures.eml#broken.docx": "corrupt"}
    by_id = {d.document_id: d for d in batch.documents}
    assert set(by_id) == {"figures.eml", "figures.eml#review.docx"}
    mail = by_id["figures.eml"]
    assert "# Q3" in mail.text and "See the attached files." in mail.text  # the HTML body, through the HTML parser
    assert (1, "Figures") in heading_titles(mail) and (1, "Q3") in heading_titles(mail)
    review = by_id["figures.eml#review.docx"]
    assert review.metadata["author"] == "Priya Raman"  # the Word file's own author (the sender's is the same here)
    assert review.metadata["attached_to"] == "figures.eml" and review.metadata["from"].startswith("Priya Raman")


@pytest.mark.parametrize("data", [b"", b"\x00\x01", b"Subject: only a subject\n\n"])
def test_empty_or_binary_emails(tmp_path, data):
    (tmp_path / "m.eml").write_bytes(data)
    batch = parse_sources([tmp_path], tmp_path)
    assert batch.documents == [] and len(batch.rejections) == 1
