"""Spreadsheets -> pipe tables: Excel (.xlsx, .xlsm) through openpyxl, each sheet a `#` section with its rows as
one table (formulas as the values Excel last calculated, never evaluated; macros never run), and CSV through the
standard library, one table. The first non-empty row is the header; empty rows and trailing empty columns go."""

from __future__ import annotations

import csv
import datetime as dt
import io
import zipfile
from collections.abc import Iterable, Sequence

from ragloom.errors import ParseError
from ragloom.parsing.base import Parsed, ParseLimits, file_metadata
from ragloom.parsing.containers import checked_zip
from ragloom.parsing.markdown import markdown_table

_CSV_DELIMITERS = ",;\t|"
_SNIFF_CHARS = 64_000


def xlsx_to_text(data: bytes, limits: ParseLimits) -> Parsed:
    from openpyxl import load_workbook
    from openpyxl.utils.exceptions import InvalidFileException

    stream = checked_zip(data, limits)
    try:
        # read_only streams rows without building the whole sheet; data_only gives cached formula values
        workbook = load_workbook(stream, read_only=True, data_only=True)
    except (InvalidFileException, zipfile.BadZipFile, KeyError, ValueError, TypeError) as e:
        raise ParseError("corrupt", f"unreadable Excel package: {type(e).__name__}: {e}") from e
    try:
        sections: list[str] = []
        cells = 0
        for sheet in workbook.worksheets:
            declared = sheet.max_row if isinstance(sheet.max_row, int) else 0
            if declared > limits.max_sheet_rows:
                raise ParseError("oversized", f"sheet {sheet.title!r} declares {declared} rows > limit "
                                              f"{limits.max_sheet_rows} (RAGLOOM_PARSE_MAX_SHEET_ROWS)")
            rows, cells = _table_rows(sheet.iter_rows(values_only=True), f"sheet {sheet.title!r}", limits, cells)
            table = markdown_table(rows)
            if table:
                sections.append(f"# {' '.join(sheet.title.split())}\n\n{table}")
        props = workbook.properties
        metadata = file_metadata(author=props.creator, created=props.created, modified=props.modified,
                                 last_modified_by=props.lastModifiedBy)
        title = (props.title or "").strip()
    except ParseError:
        raise
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError, AttributeError) as e:
        raise ParseError("corrupt", f"unreadable Excel sheet: {type(e).__name__}: {e}") from e
    finally:
        workbook.close()
    if not sections:
        raise ParseError("empty", "no cells with values in any sheet")
    return Parsed(text="\n\n".join(sections), title=title, metadata=metadata)


def csv_to_text(text: str, limits: ParseLimits) -> Parsed:
    """``text``: the decoded file. The delimiter (``, ; tab |``) is sniffed from its start."""
    sample = text[:_SNIFF_CHARS]
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(sample, delimiters=_CSV_DELIMITERS)
    except csv.Error:
        dialect = csv.excel
    try:
        rows, _ = _table_rows(csv.reader(io.StringIO(text, newline=""), dialect), "the file", limits, 0)
    except csv.Error as e:
        raise ParseError("malformed", f"CSV: {e}") from e
    table = markdown_table(rows)
    if not table:
        raise ParseError("empty", "no values in the CSV file")
    return Parsed(text=table)


def _table_rows(rows: Iterable[Sequence[object]], where: str, limits: ParseLimits,
                cells: int) -> tuple[list[list[str]], int]:
    """Non-empty rows as text cells, trailing empty columns dropped; ``cells`` counts every cell read so far
    (workbook-wide), against ``limits.max_cells``."""
    kept: list[list[str]] = []
    for number, row in enumerate(rows, start=1):
        if number > limits.max_sheet_rows:
            raise ParseError("oversized", f"{where} has more than {limits.max_sheet_rows} rows "
                                          "(RAGLOOM_PARSE_MAX_SHEET_ROWS)")
        cells += len(row)
        if cells > limits.max_cells:
            raise ParseError("oversized", f"more than {limits.max_cells} cells (RAGLOOM_PARSE_MAX_CELLS)")
        values = [cell_text(value) for value in row]
        if any(values):
            kept.append(values)
    width = max((max((i + 1 for i, v in enumerate(row) if v), default=0) for row in kept), default=0)
    return [row[:width] for row in kept], cells


def cell_text(value: object) -> str:
    """A cell as people read it: whole floats without ".0", 15 significant digits, dates in ISO form."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.15g}"
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return " ".join(str(value).split())
