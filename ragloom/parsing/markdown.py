"""Markdown-like text: the heading tree (ATX headings with the span of each section), and pipe tables written
by the parsers and found again by the chunkers."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ragloom.types import Heading

# Formats whose parsed text is Markdown-like (headings as `#` lines, tables as pipe tables).
MARKDOWN_FORMATS = frozenset({"markdown", "html", "docx", "pptx", "xlsx", "csv", "email"})

# ATX headings only: setext underlines (`===`/`---`) are ambiguous with rules and tables in real files.
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def parse_headings(text: str) -> list[Heading]:
    """Headings in document order; a section ends where the next heading of its level or above starts.

    Lines inside fenced code blocks are not headings (a `# comment` in a shell snippet is code).
    """
    found: list[tuple[int, str, int]] = []  # (level, title, start)
    fence: str | None = None
    offset = 0
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        fence_match = _FENCE.match(stripped)
        if fence is not None:
            if fence_match and fence_match.group(1)[0] == fence[0] and len(fence_match.group(1)) >= len(fence):
                fence = None
        elif fence_match:
            fence = fence_match.group(1)
        else:
            match = _ATX.match(stripped)
            if match:
                title = (match.group(2) or "").strip()
                if title:
                    found.append((len(match.group(1)), title, offset))
        offset += len(line)

    ends = [len(text)] * len(found)
    open_sections: list[int] = []  # indexes into found, shallowest first
    for i, (level, _, start) in enumerate(found):
        while open_sections and found[open_sections[-1]][0] >= level:
            ends[open_sections.pop()] = start
        open_sections.append(i)
    return [Heading(level=level, title=title, start=start, end=end)
            for (level, title, start), end in zip(found, ends, strict=True)]


def first_title(headings: list[Heading]) -> str:
    """The first level-1 heading, else the first heading, else ''."""
    for heading in headings:
        if heading.level == 1:
            return heading.title
    return headings[0].title if headings else ""


# pipe tables ---------------------------------------------------------------------------------------------

_TABLE_LINE = re.compile(r"[ \t]{0,3}\|[^\n]*")
_DELIMITER = re.compile(r"[ \t]{0,3}\|(?:[ \t]*:?-+:?[ \t]*\|)+[ \t]*")


@dataclass(frozen=True)
class TableSpan:
    """A pipe table in a text: ``rows`` are the spans of its lines (header, delimiter, body rows), each
    without its newline; ``header_end`` is where the delimiter line ends."""

    start: int
    end: int
    header_end: int
    rows: tuple[tuple[int, int], ...]

    @property
    def body_rows(self) -> tuple[tuple[int, int], ...]:
        return self.rows[2:]


def markdown_table(rows: Sequence[Sequence[object]]) -> str:
    """A pipe table whose first row is the header; cells on one line each, ``|`` escaped, rows padded to one
    width. '' for no rows."""
    cells = [[_cell(value) for value in row] for row in rows]
    if not cells:
        return ""
    width = max(1, *(len(row) for row in cells))
    cells = [row + [""] * (width - len(row)) for row in cells]
    lines = [_row(cells[0]), "|" + " --- |" * width, *(_row(row) for row in cells[1:])]
    return "\n".join(lines)


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def find_tables(text: str) -> list[TableSpan]:
    """Every pipe table: a `|` line, then a delimiter line (`| --- |`), then the `|` lines that follow."""
    tables: list[TableSpan] = []
    if "|" not in text:
        return tables
    lines: list[tuple[int, int]] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        lines.append((offset, offset + len(body)))
        offset += len(line)
    i = 0
    while i < len(lines) - 1:
        (a, b), (c, d) = lines[i], lines[i + 1]
        if _TABLE_LINE.fullmatch(text, a, b) and _DELIMITER.fullmatch(text, c, d):
            j = i + 2
            while j < len(lines) and _TABLE_LINE.fullmatch(text, *lines[j]):
                j += 1
            rows = tuple(lines[i:j])
            tables.append(TableSpan(start=a, end=rows[-1][1], header_end=d, rows=rows))
            i = j
        else:
            i += 1
    return tables
