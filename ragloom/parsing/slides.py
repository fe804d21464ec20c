"""PowerPoint (.pptx, .pptm) -> Markdown-like text through python-pptx: each slide a `#` section under its title,
its shapes top to bottom, left to right (bullets as `- ` lines, tables as pipe tables), then its speaker notes.
Macros in a .pptm are never run (python-pptx only reads XML)."""

from __future__ import annotations

from collections.abc import Iterator

from ragloom.errors import ParseError
from ragloom.parsing.base import Parsed, ParseLimits, core_properties
from ragloom.parsing.containers import checked_zip
from ragloom.parsing.markdown import markdown_table

NOTES_LABEL = "Notes:"


def pptx_to_text(data: bytes, limits: ParseLimits) -> Parsed:
    from pptx import Presentation
    from pptx.exc import PackageNotFoundError

    stream = checked_zip(data, limits)
    try:
        presentation = Presentation(stream)
        sections = [_slide(number, slide) for number, slide in enumerate(presentation.slides, start=1)]
        metadata, title = core_properties(presentation.core_properties)
    except (PackageNotFoundError, KeyError, ValueError) as e:
        raise ParseError("corrupt", f"unreadable PowerPoint package: {type(e).__name__}: {e}") from e
    text = "\n\n".join(sections)
    if not sections or not any(line.strip() and not line.startswith("# ") for line in text.splitlines()):
        raise ParseError("empty", "no text on any slide")
    return Parsed(text=text, title=title, metadata=metadata)


def _slide(number: int, slide) -> str:  # noqa: ANN001 (python-pptx's Slide)
    title_shape = slide.shapes.title
    title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None else ""
    blocks = [f"# {title or f'Slide {number}'}"]
    shapes = sorted((s for s in _shapes(slide.shapes) if title_shape is None or s.shape_id != title_shape.shape_id),
                    key=lambda s: (s.top or 0, s.left or 0))
    for shape in shapes:
        if shape.has_table:
            table = markdown_table([[cell.text for cell in row.cells] for row in shape.table.rows])
            if table:
                blocks.append(table)
        elif shape.has_text_frame:
            block = _text_frame(shape.text_frame, bullets=_is_body(shape))
            if block:
                blocks.append(block)
    if slide.has_notes_slide:
        notes = slide.notes_slide.notes_text_frame
        text = " ".join(notes.text.split()) if notes is not None else ""
        if text:
            blocks.append(f"{NOTES_LABEL} {text}")
    return "\n\n".join(blocks)


def _shapes(shapes) -> Iterator:  # noqa: ANN001
    """Shapes with group shapes opened."""
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    for shape in shapes:
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            yield from _shapes(shape.shapes)
        else:
            yield shape


def _is_body(shape) -> bool:  # noqa: ANN001
    """A body or content placeholder, whose paragraphs are bullet points (not a subtitle or a text box)."""
    from pptx.enum.shapes import PP_PLACEHOLDER

    return shape.is_placeholder and shape.placeholder_format.type in (PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT)


def _text_frame(frame, *, bullets: bool) -> str:  # noqa: ANN001
    """Bullets (indented by level) for a body placeholder; else the lines of one paragraph."""
    lines = []
    for paragraph in frame.paragraphs:
        text = " ".join(paragraph.text.split())
        if text:
            lines.append(f"{'  ' * paragraph.level}- {text}" if bullets else text)
    return "\n".join(lines)
