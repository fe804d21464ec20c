#!/usr/bin/env python3
"""Writes the sample corpus's Word, PowerPoint, Excel, CSV and email files with the libraries ragloom reads them with.

Office libraries stamp the current time into what they write (core properties, zip entry dates), which would
change the files' content hashes on every run; here every date is fixed, so running this again gives the same
bytes. Run from anywhere: `python scripts/make-sample-formats.py [OUTPUT_DIR]` (default: sample_corpus/).
"""

from __future__ import annotations

import io
import re
import sys
import zipfile
from datetime import datetime
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

from docx import Document
from openpyxl import Workbook
from pptx import Presentation
from pptx.util import Inches

ROOT = Path(__file__).resolve().parent.parent
CREATED = datetime(2024, 11, 4, 9, 0, 0)
MODIFIED = datetime(2024, 11, 18, 16, 30, 0)
ZIP_DATE = (2024, 11, 18, 16, 30, 0)


def fixed_zip(data: bytes, core_dates: bool = False) -> bytes:
    """The same package with every entry dated ZIP_DATE (and, with ``core_dates``, docProps/core.xml's created and
    modified set to CREATED / MODIFIED: openpyxl writes the time of saving there)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            content = source.read(info.filename)
            if core_dates and info.filename == "docProps/core.xml":
                text = content.decode("utf-8")
                for tag, value in (("created", CREATED), ("modified", MODIFIED)):
                    text = re.sub(rf"(<dcterms:{tag}[^>]*>)[^<]*(</dcterms:{tag}>)",
                                  rf"\g<1>{value.isoformat()}Z\g<2>", text)
                content = text.encode("utf-8")
            target.writestr(zipfile.ZipInfo(info.filename, date_time=ZIP_DATE), content,
                            compress_type=zipfile.ZIP_DEFLATED)
    return out.getvalue()


def set_core(props, title: str, author: str) -> None:  # noqa: ANN001 (python-docx / python-pptx core properties)
    props.title, props.author, props.last_modified_by = title, author, author
    props.created, props.modified, props.revision = CREATED, MODIFIED, 1


def word() -> bytes:
    doc = Document()
    set_core(doc.core_properties, "Quarterly Business Review Q3 2024", "Priya Raman")
    doc.add_paragraph("Quarterly Business Review Q3 2024", style="Title")
    doc.add_paragraph("Prepared by Priya Raman, Chief Financial Officer, for the board of Corvane Systems AS.")
    doc.add_heading("Summary", level=1)
    doc.add_paragraph("HarborSight subscriptions kept growing in the third quarter and the KelpWatch module "
                      "shipped its first production units from the Tromsø optics site.")
    doc.add_heading("Revenue by business unit", level=1)
    doc.add_paragraph("Revenue in the quarter was NOK 98 million, 24% more than a year earlier.")
    table = doc.add_table(rows=1, cols=3)
    for cell, text in zip(table.rows[0].cells, ("Business unit", "Revenue (NOK million)", "Growth"), strict=True):
        cell.text = text
    for row in (("HarborSight software", "54", "31%"), ("TideLens hardware", "33", "12%"),
                ("Installation services", "11", "9%")):
        for cell, text in zip(table.add_row().cells, row, strict=True):
            cell.text = text
    doc.add_heading("Risks", level=1)
    doc.add_heading("Supply chain", level=2)
    doc.add_paragraph("Two risks need the board's attention:")
    doc.add_paragraph("Battery cells for TideLens come from a single supplier.", style="List Bullet")
    doc.add_paragraph("Optical filters for KelpWatch have a 14-week lead time.", style="List Bullet")
    doc.add_heading("Customers", level=2)
    doc.add_paragraph("The Northsea Port Consortium in Rotterdam renewed its HarborSight contract for five years; "
                      "Sofia Almeida leads the renewal of the Atlantic Aquaculture Group in Lisbon.")
    buffer = io.BytesIO()
    doc.save(buffer)
    return fixed_zip(buffer.getvalue())


def slides() -> bytes:
    prs = Presentation()
    set_core(prs.core_properties, "Corvane Strategy 2025", "Ingrid Solberg")
    title_slide = prs.slides.add_slide(prs.slide_layouts[0])
    title_slide.shapes.title.text = "Corvane Strategy 2025"
    title_slide.placeholders[1].text = "Ingrid Solberg, Chief Executive Officer"
    bullets = prs.slides.add_slide(prs.slide_layouts[1])
    bullets.shapes.title.text = "Three priorities"
    frame = bullets.placeholders[1].text_frame
    frame.text = "Make HarborSight the operating system of the port"
    for text, level in (("Forecasts of currents and sediment for every site", 1),
                        ("Grow KelpWatch with aquaculture customers in Norway and Portugal", 0),
                        ("Open a service hub in Singapore for Southeast Asia", 0)):
        paragraph = frame.add_paragraph()
        paragraph.text, paragraph.level = text, level
    bullets.notes_slide.notes_text_frame.text = "Tomas Okafor presents the HarborSight roadmap after this slide."
    targets = prs.slides.add_slide(prs.slide_layouts[5])
    targets.shapes.title.text = "Targets for 2025"
    shape = targets.shapes.add_table(4, 3, Inches(1), Inches(2), Inches(8), Inches(2))
    for r, row in enumerate((("Goal", "2024", "2025 target"), ("HarborSight sites", "212", "300"),
                             ("TideLens buoys deployed", "1,450", "1,800"), ("KelpWatch customers", "2", "6"))):
        for c, text in enumerate(row):
            shape.table.cell(r, c).text = text
    targets.notes_slide.notes_text_frame.text = "Priya Raman has checked the figures against the budget."
    buffer = io.BytesIO()
    prs.save(buffer)
    return fixed_zip(buffer.getvalue())


def workbook() -> bytes:
    book = Workbook()
    book.properties.title = "Sensor fleet 2024"
    book.properties.creator = "Kenji Watanabe"
    book.properties.lastModifiedBy = "Kenji Watanabe"
    fleet = book.active
    fleet.title = "Fleet"
    fleet.append(["Site", "Customer", "Product", "Buoys", "Uptime %"])
    for row in (("Halifax Harbour", "Halifax Harbour Trust", "TideLens Harbour", 12, 99.2),
                ("Rotterdam Maasvlakte", "Northsea Port Consortium", "TideLens Offshore", 18, 98.7),
                ("Lisbon coast", "Atlantic Aquaculture Group", "TideLens Kelp", 4, 97.5),
                ("Bergen Byfjorden", "Corvane test site", "TideLens Harbour", 3, 99.8)):
        fleet.append(list(row))
    service = book.create_sheet("Service visits")
    service.append(["Date", "Site", "Technician", "Reason"])
    for row in ((datetime(2024, 3, 14), "Halifax Harbour", "Kenji Watanabe", "Battery swap"),
                (datetime(2024, 6, 2), "Lisbon coast", "Chloé Martin", "Anti-fouling housing check"),
                (datetime(2024, 9, 21), "Rotterdam Maasvlakte", "Kenji Watanabe", "Storm damage to mooring")):
        service.append(list(row))
    buffer = io.BytesIO()
    book.save(buffer)
    return fixed_zip(buffer.getvalue(), core_dates=True)


CUSTOMERS_CSV = """customer,city,country,products,since,account manager
Northsea Port Consortium,Rotterdam,Netherlands,"TideLens Offshore, HarborSight",2019,Sofia Almeida
Halifax Harbour Trust,Halifax,Canada,"TideLens Harbour, HarborSight",2020,Kenji Watanabe
Atlantic Aquaculture Group,Lisbon,Portugal,"TideLens Kelp, KelpWatch, HarborSight",2024,Sofia Almeida
Straits Aquaculture Pte. Ltd.,Singapore,Singapore,HarborSight,2022,Wei Ling Tan
"""


def email(attachment: bytes) -> bytes:
    message = EmailMessage()
    message["Subject"] = "KelpWatch production units shipped"
    message["From"] = "Maja Eriksen <maja.eriksen@corvane.example>"
    message["To"] = "Tomas Okafor <tomas.okafor@corvane.example>, Sofia Almeida <sofia.almeida@corvane.example>"
    message["Date"] = format_datetime(datetime.fromisoformat("2024-10-07T14:05:00+02:00"))
    message["Message-ID"] = "<kelpwatch-shipped-2024-10-07@corvane.example>"
    message.set_content(
        "Hi Tomas, hi Sofia,\n\n"
        "the first twenty KelpWatch production modules left the Tromsø optics site today. Eight go to the\n"
        "Atlantic Aquaculture Group near Lisbon for Project Kelp, the rest to the Halifax field laboratory\n"
        "for calibration on the pier.\n\n"
        "The attached list has the serial numbers and where each module goes.\n\n"
        "Best regards,\nMaja Eriksen\nOptics team lead, Tromsø\n")
    message.add_attachment(attachment, maintype="text", subtype="csv", filename="kelpwatch_shipment.csv")
    message.set_boundary("corvane-sample-boundary")
    return bytes(message)


SHIPMENT_CSV = (b"serial,destination,project\nKW-2024-0001,Lisbon coast,Project Kelp\n"
                b"KW-2024-0002,Lisbon coast,Project Kelp\nKW-2024-0009,Halifax field laboratory,Calibration\n")


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "sample_corpus"
    files = {
        "reports/quarterly_review_q3_2024.docx": word(),
        "company/strategy_2025.pptx": slides(),
        "reports/sensor_fleet_2024.xlsx": workbook(),
        "customers/customers.csv": CUSTOMERS_CSV.encode(),
        "news/kelpwatch_shipped.eml": email(SHIPMENT_CSV),
    }
    for name, data in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(f"{path} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
