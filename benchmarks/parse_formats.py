"""Parsing throughput per format: documents/s and MB/s of ragloom.parsing.parse_content on generated files.

Each format's file is written once by its own library (python-docx, python-pptx, openpyxl, the standard library's
csv and email; the PDF is the sample corpus's two-page annual report), ``--scale`` sections / slides / 20-row
blocks long, then parsed ``--docs`` times per run; the figure is the median of ``--runs`` runs. Markdown (the
parser that only decodes and finds headings) is the baseline in the same run. One JSON line per format.
`pdf-ocr` is a one-page scanned PDF (Pillow draws the text onto an image and writes it as an image-only page) read
with OCR on (Tesseract, English), ``--ocr-docs`` times per run: the cost of RAGLOOM_PARSE_OCR_LANGUAGES per page.

    python benchmarks/parse_formats.py [--docs 20] [--scale 10] [--runs 3] [--ocr-docs 3]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import time
from email.message import EmailMessage

from docx import Document
from openpyxl import Workbook
from pptx import Presentation
from pptx.util import Inches

from ragloom.parsing import ParseLimits, parse_content
from ragloom.parsing.markdown import markdown_table
from ragloom.settings import SAMPLE_CORPUS

SITES = ["Halifax Harbour", "Rotterdam Maasvlakte", "Lisbon coast", "Bergen Byfjorden", "Singapore Strait"]
PARAGRAPH = ("The Sensor Platform team moored {n} TideLens buoys at {site} this quarter; HarborSight forecasts of "
             "currents and sediment now reach the pilots of the port every ten minutes.")


def rows(n: int) -> list[list[str]]:
    return [["site", "buoys", "uptime", "customer", "product", "visits"]] + [
        [SITES[i % 5], str(i % 40), f"9{i % 10}.{i % 7}", f"Customer {i % 11}", "TideLens Harbour", str(i % 6)]
        for i in range(n)]


def docx_file(scale: int) -> bytes:
    doc = Document()
    doc.add_paragraph("Fleet review", style="Title")
    for s in range(scale):
        doc.add_heading(f"Site {s}", level=1)
        for p in range(3):
            doc.add_paragraph(PARAGRAPH.format(n=s + p, site=SITES[s % 5]))
        table_rows = rows(5)
        table = doc.add_table(rows=len(table_rows), cols=len(table_rows[0]))
        for r, row in enumerate(table_rows):
            for c, value in enumerate(row):
                table.cell(r, c).text = value
    buffer = io.BytesIO()
    doc.save(buffer)
    return buffer.getvalue()


def pptx_file(scale: int) -> bytes:
    prs = Presentation()
    for s in range(scale):
        slide = prs.slides.add_slide(prs.slide_layouts[1])
        slide.shapes.title.text = f"Site {s}"
        frame = slide.placeholders[1].text_frame
        frame.text = PARAGRAPH.format(n=s, site=SITES[s % 5])
        for b in range(3):
            frame.add_paragraph().text = f"Priority {b}: {SITES[(s + b) % 5]}"
        slide.notes_slide.notes_text_frame.text = PARAGRAPH.format(n=s + 1, site=SITES[(s + 1) % 5])
        if s % 3 == 0:
            table_rows = rows(4)
            shape = slide.shapes.add_table(len(table_rows), len(table_rows[0]), Inches(0.5), Inches(4), Inches(9),
                                           Inches(2))
            for r, row in enumerate(table_rows):
                for c, value in enumerate(row):
                    shape.table.cell(r, c).text = value
    buffer = io.BytesIO()
    prs.save(buffer)
    return buffer.getvalue()


def xlsx_file(scale: int) -> bytes:
    book = Workbook()
    for row in rows(20 * scale):
        book.active.append(row)
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def csv_file(scale: int) -> bytes:
    out = io.StringIO()
    csv.writer(out).writerows(rows(20 * scale))
    return out.getvalue().encode()


def eml_file(scale: int) -> bytes:
    message = EmailMessage()
    message["Subject"], message["From"], message["To"] = "Fleet figures", "Kenji Watanabe <k@corvane.example>", \
        "Tomas Okafor <t@corvane.example>"
    message.set_content("\n\n".join(PARAGRAPH.format(n=i, site=SITES[i % 5]) for i in range(3 * scale)))
    message.add_attachment(csv_file(max(1, scale // 4)), maintype="text", subtype="csv", filename="fleet.csv")
    return bytes(message)


def markdown_file(scale: int) -> bytes:
    parts = ["# Fleet review"]
    for s in range(scale):
        parts += [f"## Site {s}"] + [PARAGRAPH.format(n=s + p, site=SITES[s % 5]) for p in range(3)]
        parts.append(markdown_table(rows(5)))
    return "\n\n".join(parts).encode()


def scanned_pdf_file(scale: int) -> bytes:
    """A letter-size page at 200 dpi holding an image of a few paragraphs, and no text layer."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("L", (1700, 2200), 255)
    draw, font = ImageDraw.Draw(image), ImageFont.load_default(size=32)
    words = " ".join(PARAGRAPH.format(n=i, site=SITES[i % 5]) for i in range(4)).split()
    lines = [" ".join(words[i:i + 9]) for i in range(0, len(words), 9)]
    for i, line in enumerate(lines):
        draw.text((120, 150 + i * 48), line, fill=0, font=font)
    buffer = io.BytesIO()
    image.save(buffer, format="PDF", resolution=200)
    return buffer.getvalue()


FORMATS = {
    "markdown": markdown_file,
    "docx": docx_file,
    "pptx": pptx_file,
    "xlsx": xlsx_file,
    "csv": csv_file,
    "email": eml_file,
    "pdf": lambda scale: (SAMPLE_CORPUS / "reports" / "annual_report_2024.pdf").read_bytes(),
    "pdf-ocr": scanned_pdf_file,
}
OCR = ParseLimits(ocr_languages="eng")


def measure(fmt: str, data: bytes, docs: int, runs: int, limits: ParseLimits | None = None) -> dict[str, object]:
    parsed = parse_content(fmt, data, limits)  # warm: imports, caches
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        for _ in range(docs):
            parse_content(fmt, data, limits)
        seconds.append(time.perf_counter() - started)
    median = statistics.median(seconds)
    return {"format": fmt, "file_bytes": len(data), "text_chars": len(parsed.text), "documents": docs,
            "runs": runs, "docs_per_s": round(docs / median, 1), "mb_per_s": round(docs * len(data) / median / 1e6, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=20, help="files parsed per run")
    parser.add_argument("--scale", type=int, default=10, help="sections / slides / 20-row blocks per file")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--ocr-docs", type=int, default=3, help="scanned pages read by OCR per run (pdf-ocr)")
    args = parser.parse_args()
    results = []
    for fmt in args.formats.split(","):
        if fmt == "pdf-ocr":
            result = {**measure("pdf", FORMATS[fmt](args.scale), args.ocr_docs, args.runs, OCR), "format": fmt}
        else:
            result = measure(fmt, FORMATS[fmt](args.scale), args.docs, args.runs)
        results.append(result)
        print(json.dumps(result), flush=True)
    print("\n| format | file KB | docs/s | MB/s |\n| --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['format']} | {int(r['file_bytes']) / 1000:.1f} | {r['docs_per_s']} | {r['mb_per_s']} |")


if __name__ == "__main__":
    main()
