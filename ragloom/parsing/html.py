"""HTML -> Markdown-like text: boilerplate dropped, headings kept as `#` lines so the heading tree works."""

from __future__ import annotations

from bs4 import BeautifulSoup, NavigableString, Tag

# Page furniture, not content. <header> only counts as furniture outside <article>/<main>.
_DROP_TAGS = ("script", "style", "noscript", "template", "nav", "footer", "aside", "form", "iframe", "svg",
              "button", "select", "canvas", "object", "embed")
_DROP_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar"}
_BLOCK_TAGS = {"p", "div", "section", "article", "main", "header", "li", "pre", "blockquote", "tr", "table",
               "ul", "ol", "dl", "dt", "dd", "br", "hr", "figure", "figcaption", "address", "details", "summary",
               "body", "caption", "tbody", "thead", "tfoot", "h1", "h2", "h3", "h4", "h5", "h6"}
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}


def html_to_text(markup: str) -> tuple[str, str]:
    """(text, title): block elements become paragraphs, h1-h6 become `#` lines, list items `- ` lines."""
    soup = BeautifulSoup(markup, "lxml")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    doomed: list[Tag] = []
    for tag in soup.find_all(True):
        role = str(tag.get("role") or "").lower()
        if tag.name in _DROP_TAGS or role in _DROP_ROLES or tag.name == "head":
            doomed.append(tag)
        elif tag.name == "header" and tag.find_parent(("article", "main")) is None:
            doomed.append(tag)
    for tag in doomed:
        tag.extract()  # extract, not decompose: decompose recurses and deep markup would overflow the stack
    root = soup.find("main") or soup.find("article") or soup.body or soup
    return _blocks_to_text(root), title


def _blocks_to_text(root: Tag) -> str:
    blocks: list[str] = []
    buffer: list[str] = []
    prefix = ""
    pre_depth = 0

    def flush() -> None:
        nonlocal prefix
        raw = "".join(buffer)
        text = raw.strip("\n") if pre_depth else " ".join(raw.split())
        buffer.clear()
        if text.strip():
            blocks.append(prefix + text)
            prefix = ""  # an empty flush keeps it: <li><p>x</p></li> is still a list item

    # An explicit stack instead of recursion: deeply nested markup must not overflow Python's stack.
    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        if isinstance(node, NavigableString):
            if type(node) is NavigableString:  # comments, doctypes, CDATA and script text are subclasses
                buffer.append(str(node))
            continue
        if not isinstance(node, Tag):
            continue
        name = node.name
        if leaving:
            if name in _BLOCK_TAGS:
                flush()
            if name in _HEADINGS or name == "li":
                prefix = ""
            if name == "pre":
                pre_depth -= 1
            continue
        if name in _BLOCK_TAGS:
            flush()
        if name in _HEADINGS:
            prefix = "#" * _HEADINGS[name] + " "
        elif name == "li":
            prefix = "- "
        elif name == "pre":
            pre_depth += 1
        elif name in ("td", "th") and "".join(buffer).strip():
            buffer.append(" | ")
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(node.contents))
    flush()
    return "\n\n".join(blocks)
