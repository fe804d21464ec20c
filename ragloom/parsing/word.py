"""Word (.docx, .docm) -> Markdown-like text through python-docx: heading styles as `#` lines, lists as `- `
lines, tables as pipe tables, in document order. Macros in a .docm are never run (python-docx only reads XML)."""

from __future__ import annotations

import re

from ragloom.errors import ParseError
from ragloom.parsing.base import Parsed, ParseLimits, core_properties
from ragloom.parsing.containers import checked_zip
from ragloom.parsing.markdown import markdown_table

_HEADING_STYLE = re.compile(r"Heading ([1-9])")
_MACRO_MAIN = "application/vnd.ms-word.document.macroEnabled.main+xml"


def docx_to_text(data: bytes, limits: ParseLimits) -> Parsed:
    from docx.opc.exceptions import PackageNotFoundError
    from docx.opc.part import PartFactory
    from docx.package import Package
    from docx.parts.document import DocumentPart

    # python-docx's Document() accepts only the macro-free content type; the document part of a .docm is the
    # same XML, so it is read with the same part class (the vbaProject part is never touched).
    PartFactory.part_type_for.setdefault(_MACRO_MAIN, DocumentPart)
    stream = checked_zip(data, limits)
    try:
        part = Package.open(stream).main_document_part
        if not isinstance(part, DocumentPart):
            raise ParseError("unsupported", f"not a Word document (main part is {part.content_type})")
        document = part.document
        blocks = _blocks(document)
        metadata, title = core_properties(document.core_properties)
    except ParseError:
        raise
    except (PackageNotFoundError, KeyError, ValueError) as e:
        raise ParseError("corrupt", f"unreadable Word package: {type(e).__name__}: {e}") from e
    text = "\n\n".join(blocks)
    if not text.strip():
        raise ParseError("empty", "no text in the Word document")
    return Parsed(text=text, title=title, metadata=metadata)


def _blocks(document) -> list[str]:  # noqa: ANN001 (python-docx's Document)
    from docx.table import Table

    items = list(document.iter_inner_content())
    # Style names by id, read once: python-docx's Paragraph.style scans every style for an unstyled paragraph
    # (half the parsing time of a long document).
    names = {style.style_id: style.name or "" for style in document.styles}

    def style_name(paragraph) -> str:  # noqa: ANN001
        style_id = paragraph._p.style  # the paragraph's own style id; None means the default paragraph style
        return names.get(style_id, "") if style_id else ""

    # With a "Title" paragraph, it is the level-1 heading and "Heading N" sits one level below it.
    has_title = any(not isinstance(item, Table) and style_name(item) == "Title" for item in items)
    blocks: list[str] = []
    for item in items:
        if isinstance(item, Table):
            rows = [[cell.text for cell in row.cells] for row in item.rows]
            table = markdown_table(rows)
            if table:
                blocks.append(table)
            continue
        text = " ".join(item.text.split())
        if not text:
            continue
        style = style_name(item)
        heading = _HEADING_STYLE.fullmatch(style)
        if style == "Title":
            blocks.append(f"# {text}")
        elif heading:
            level = min(6, int(heading.group(1)) + (1 if has_title else 0))
            blocks.append(f"{'#' * level} {text}")
        elif style.startswith("List") or _numbered(item):
            _append_list_item(blocks, f"- {text}")
        else:
            blocks.append(text)
    return blocks


def _append_list_item(blocks: list[str], line: str) -> None:
    """Consecutive list items form one block (one paragraph for the chunkers), as in Markdown."""
    if blocks and blocks[-1].startswith("- "):
        blocks[-1] += "\n" + line
    else:
        blocks.append(line)


def _numbered(paragraph) -> bool:  # noqa: ANN001
    """A paragraph in a numbered or bulleted list by direct formatting (not by a List style)."""
    properties = paragraph._p.pPr
    return properties is not None and properties.numPr is not None
