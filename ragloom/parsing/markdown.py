"""The heading tree of Markdown-like text: ATX headings (`# Title`) with the span of each section."""

from __future__ import annotations

import re

from ragloom.types import Heading

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
