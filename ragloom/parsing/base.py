"""What every format parser returns (Parsed), the caps it works under (ParseLimits), and file-metadata values."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

DEFAULT_MAX_BYTES = 50_000_000


@dataclass(frozen=True)
class ParseLimits:
    """Caps that turn hostile or absurd files into rejections instead of exhausted memory.

    Set from Settings (RAGLOOM_PARSE_*) at the composition root; the defaults are the settings' defaults.
    """

    max_bytes: int = DEFAULT_MAX_BYTES  # a file as stored
    max_unpacked_bytes: int = 200_000_000  # an Office file's zip entries, decompressed, as their headers declare
    max_sheet_rows: int = 100_000  # one sheet or CSV file
    max_cells: int = 2_000_000  # all sheets of a workbook together
    # OCR of PDF pages without a text layer: tesseract's languages (e.g. "eng", "eng+deu"); "" = no OCR. Not a cap,
    # but it travels with them: the one object of parse settings handed from the composition root to the parsers.
    ocr_languages: str = ""


@dataclass(frozen=True)
class Attachment:
    """A file inside another (an email's attachment), parsed as a document of its own."""

    filename: str
    data: bytes


@dataclass
class Parsed:
    """One file's content as Markdown-like text (headings as `#` lines, tables as pipe tables)."""

    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)  # from the file itself: author, created, modified, ...
    page_starts: list[int] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    # (reason, detail) of what could not be read while the rest was: reported as rejections, with the document kept
    problems: list[tuple[str, str]] = field(default_factory=list)


def iso_datetime(value: datetime | date | None) -> str:
    """An ISO 8601 string for a file's date (naive datetimes are UTC, as Office and PDF store them); '' for none."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    return value.isoformat()


def core_properties(props: Any) -> tuple[dict[str, Any], str]:
    """(metadata, title) from an Office file's core properties as python-docx and python-pptx expose them."""
    metadata = file_metadata(author=props.author, created=props.created, modified=props.modified,
                             last_modified_by=props.last_modified_by)
    return metadata, (props.title or "").strip()


def file_metadata(**values: Any) -> dict[str, Any]:
    """The non-empty values, strings stripped: what a file says about itself (author, created, ...)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, datetime | date):
            value = iso_datetime(value)
        if isinstance(value, str):
            value = value.strip()
        if value not in (None, "", [], ()):
            out[key] = value
    return out
